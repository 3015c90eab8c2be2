"""Hostile messages to every RPC of the tree service: a proper status, never a crash.

Each example is one call with fields at and past their edges (huge, negative as
two's complement, zero inode ids; names with NUL, '/', 10 KB, not UTF-8; int64
edges; unknown flags), or raw bytes that are no protobuf at all. After it: the
answer is OK or a status the client can act on (never UNKNOWN, or INTERNAL with a
traceback in the server's log), a refused change left the tree as it was, and
the server still answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from cloudfs.meta.service.server import META_CALLS, SESSION_CALLS
from cloudfs.meta.wire.constants import GROUP_SERVICE, META_SERVICE, VOLUME_SERVICE
from cloudfs.meta.wire.convert import status_of
from cloudfs.v1 import meta_pb2 as pb
from tests.fuzz.strategies import FUZZ, NAMES, TEXT, edge_ints, messages
from tests.fuzz.tree import PROPER, VOLUME, Tree, running_tree

READS = {
    "Lookup", "LookupIfListed", "GetAttr", "ReadDir", "ReadLink", "GetXattr", "ListXattr",
    "StatFs", "ObjectKey", "Open", "Release", "Heartbeat", "EndSession", "Refresh",
}  # fmt: skip
META_RPCS = {**META_CALLS, **SESSION_CALLS}
VOLUMES = st.sampled_from([VOLUME] * 8 + ["", "nope", "../fuzz", "fuzz\x00"])
INODES = st.one_of(
    st.integers(1, 12), st.integers(1, 12), st.integers(1, 12), edge_ints(0, 2**64 - 1)
)
NAMES_IN_TREE = st.sampled_from([b"a", b"b.txt", b"c", b"d.bin", b"e.txt", b"new"])


@pytest.fixture(scope="module", params=["memory", "local"])
def tree(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Tree]:
    """The server over a memory store, and over a local directory (real files: names
    the filesystem refuses, a tree change that moves or removes them)."""
    with running_tree(tmp_path_factory.mktemp("tree"), ufs=request.param) as t:
        yield t


def _request(name: str) -> st.SearchStrategy[Any]:
    request_type = META_RPCS[name][0]
    overrides: dict[str, st.SearchStrategy[Any]] = {"volume": VOLUMES}
    for f in ("inode", "parent", "new_parent"):
        overrides[f] = INODES
    for f in ("name", "new_name"):
        if f in request_type.DESCRIPTOR.fields_by_name:
            overrides[f] = st.one_of(NAMES_IN_TREE, NAMES)
    required = frozenset({"volume", "inode", "parent", "name"})  # most calls get to the tree
    return messages(request_type.DESCRIPTOR, overrides, required=required).map(
        lambda kw: request_type(**kw)
    )


def _reply_type(name: str) -> Any:
    """The reply message type of ``name``."""
    return {
        "ReadDir": pb.ReadDirReply, "ReadLink": pb.BytesReply, "GetXattr": pb.BytesReply,
        "ObjectKey": pb.BytesReply, "ListXattr": pb.NamesReply, "StatFs": pb.StatFsReply,
        "Refresh": pb.Invalidation, "Heartbeat": pb.HeartbeatReply, "Rmdir": pb.Empty,
        "Rename": pb.Empty, "SetXattr": pb.Empty, "RemoveXattr": pb.Empty,
        "Release": pb.Empty, "EndSession": pb.Empty,
    }.get(name, pb.AttrReply)  # fmt: skip


def check(tree: Tree, method: str, call: Any, mutates: bool) -> grpc.StatusCode:
    """Run ``call``; assert a proper answer, no traceback, and an unchanged tree if refused."""
    before = tree.snapshot() if mutates else None
    try:
        call()
        code = grpc.StatusCode.OK
    except grpc.RpcError as exc:
        code = exc.code()
        assert code in PROPER, f"{method}: {code} {exc.details()}"
    event(code.name)  # --hypothesis-show-statistics: how many got through
    assert tree.tracebacks.take() == [], f"{method} logged a traceback"
    if before is not None and code != grpc.StatusCode.OK:
        assert tree.snapshot() == before, f"a refused {method} changed the tree"
    tree.alive()
    return code


@FUZZ
@given(data=st.data(), method=st.sampled_from(sorted(META_RPCS)))
def test_meta_service(tree: Tree, data: st.DataObject, method: str) -> None:
    request = data.draw(_request(method), label="request")
    reply = _reply_type(method)
    check(tree, method, lambda: tree.meta(method, request, reply), method not in READS)


@FUZZ
@given(data=st.data(), method=st.sampled_from(["CreateVolume", "GetVolume", "DeleteVolume"]))
def test_volume_service(tree: Tree, data: st.DataObject, method: str) -> None:
    names = TEXT.filter(lambda n: n != VOLUME)  # the fuzzed volume stays
    if method == "CreateVolume":
        request: Any = pb.Volume(**data.draw(messages(pb.Volume.DESCRIPTOR, {"name": names})))
    else:
        request = pb.VolumeRef(volume=data.draw(names))
    check(tree, method, lambda: tree.call(VOLUME_SERVICE, method, request, pb.Volume), False)
    tree.call(VOLUME_SERVICE, "GetVolume", pb.VolumeRef(volume=VOLUME), pb.Volume)


@FUZZ
@given(data=st.data(), method=st.sampled_from(["JoinGroup", "LeaveGroup", "ListGroup"]))
def test_group_service(tree: Tree, data: st.DataObject, method: str) -> None:
    request_type = pb.GroupRef if method == "ListGroup" else pb.GroupMemberRequest
    request = request_type(**data.draw(messages(request_type.DESCRIPTOR)))
    reply = pb.GroupMembers if method == "ListGroup" else pb.Empty
    check(tree, method, lambda: tree.call(GROUP_SERVICE, method, request, reply), False)


ALL_METHODS = [
    *((META_SERVICE, m) for m in sorted(META_RPCS)),
    *((VOLUME_SERVICE, m) for m in ("CreateVolume", "GetVolume", "ListVolumes", "DeleteVolume")),
    *((GROUP_SERVICE, m) for m in ("JoinGroup", "LeaveGroup", "ListGroup")),
]


@FUZZ
@given(target=st.sampled_from(ALL_METHODS), body=st.binary(max_size=200))
@example(target=(META_SERVICE, "GetAttr"), body=b"\x0a\x02\xff\xfe")  # volume: not UTF-8
@example(target=(META_SERVICE, "Lookup"), body=b"\x0a\x04fuzz\x10\x01\x1a\x05\xff")  # truncated
@example(target=(VOLUME_SERVICE, "CreateVolume"), body=b"\x0a\x01\xc3")  # half a character
def test_undecodable_requests(tree: Tree, target: tuple[str, str], body: bytes) -> None:
    service, method = target
    code = check(tree, method, lambda: tree.call(service, method, body, pb.Empty), False)
    assert code != grpc.StatusCode.INTERNAL


@FUZZ
@given(request=messages(pb.WatchRequest.DESCRIPTOR, {"volume": VOLUMES}))
def test_watch(tree: Tree, request: dict[str, Any]) -> None:
    watch = tree.channel.unary_stream(
        f"/{META_SERVICE}/Watch",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.Invalidation.FromString,
    )
    try:
        list(watch(pb.WatchRequest(**request), timeout=0.1))
    except grpc.RpcError as exc:
        assert exc.code() in PROPER | {grpc.StatusCode.DEADLINE_EXCEEDED}, exc.details()
    assert tree.tracebacks.take() == []
    tree.alive()


def test_unknown_method_is_unimplemented(tree: Tree) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        tree.call(META_SERVICE, "Format", b"", pb.Empty)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


@FUZZ
@given(code=st.integers(0, 200))
def test_every_errno_has_a_status_a_client_can_act_on(code: int) -> None:
    assert status_of(code) != grpc.StatusCode.UNKNOWN
