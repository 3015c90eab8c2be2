"""The tree service's limits over a real server: message sizes, calls in flight per client."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudfs.errors import FsError
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.service.limits import ClientSlots, ServerLimits, client_of
from cloudfs.meta.wire.constants import MAX_REQUEST_BYTES, META_SERVICE
from cloudfs.types import ROOT_INODE
from cloudfs.v1 import meta_pb2 as pb
from tests.fuzz.strategies import FUZZ
from tests.fuzz.tree import VOLUME, Tree, running_tree

HOLD = "x-test-hold"


class Hold(grpc.ServerInterceptor):  # type: ignore[misc]
    """Holds every unary call that carries the ``HOLD`` header until ``release``."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.holding = 0
        self._lock = threading.Lock()

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        if HOLD not in dict(details.invocation_metadata or ()):
            return handler
        inner = handler.unary_unary

        def held(request: Any, context: grpc.ServicerContext) -> Any:
            with self._lock:
                self.holding += 1
            self.released.wait(10)
            return inner(request, context)

        return handler._replace(unary_unary=held)

    def wait_holding(self, n: int) -> None:
        until = time.monotonic() + 5
        while self.holding < n:
            assert time.monotonic() < until, f"only {self.holding} calls held"
            time.sleep(0.01)


def statfs(channel: grpc.Channel, **kw: Any) -> Any:
    call = channel.unary_unary(
        f"/{META_SERVICE}/StatFs",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.StatFsReply.FromString,
    )
    return call(pb.VolumeRef(volume=VOLUME), timeout=10, **kw)


def test_an_oversized_request_is_resource_exhausted_and_the_server_lives(tmp_path: Path) -> None:
    with running_tree(tmp_path) as tree:  # a plain channel: no send limit of its own
        value = b"v" * (MAX_REQUEST_BYTES + 1)
        request = pb.XattrRequest(volume=VOLUME, inode=1, name=b"user.big", value=value)
        with pytest.raises(grpc.RpcError) as caught:
            tree.meta("SetXattr", request, pb.Empty)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        tree.alive()
        assert tree.tracebacks.take() == []


def test_the_client_refuses_an_oversized_request_before_sending_it(tmp_path: Path) -> None:
    with running_tree(tmp_path) as tree:
        meta = GrpcMeta(tree.address, VOLUME)
        try:
            with pytest.raises(FsError):
                meta.setxattr(ROOT_INODE, b"user.big", b"v" * (MAX_REQUEST_BYTES + 1), 0)
            assert meta.statfs().name_max > 0
        finally:
            meta.close()


@pytest.fixture
def held_tree(tmp_path: Path) -> Iterator[tuple[Tree, Hold]]:
    hold = Hold()
    limits = ServerLimits(max_calls_per_client=3, max_streams_per_client=2, queue_seconds=0.3)
    try:
        with running_tree(tmp_path, "[::]", limits=limits, interceptors=(hold,)) as tree:
            yield tree, hold
    except OSError as exc:  # pragma: no cover - a host without IPv6
        pytest.skip(f"no dual-stack loopback: {exc}")
    finally:
        hold.released.set()


def test_one_client_at_its_limit_does_not_hold_up_another(
    held_tree: tuple[Tree, Hold],
) -> None:
    tree, hold = held_tree
    flooding = tree.channel  # 127.0.0.1
    other = grpc.insecure_channel(f"[::1]:{tree.server.port}")
    try:
        futures = [
            flooding.unary_unary(
                f"/{META_SERVICE}/StatFs",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=pb.StatFsReply.FromString,
            ).future(pb.VolumeRef(volume=VOLUME), timeout=10, metadata=((HOLD, "1"),))
            for _ in range(3)
        ]
        hold.wait_holding(3)

        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            statfs(flooding)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert dict(caught.value.trailing_metadata())["cloudfs-errno"] == "11"  # EAGAIN
        assert time.monotonic() - started < 2.0, "refused after a brief wait, not a hang"

        started = time.monotonic()
        assert statfs(other).stats.name_max > 0  # another client is served at once
        assert time.monotonic() - started < 1.0

        watch = flooding.unary_stream(
            f"/{META_SERVICE}/Watch",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.Invalidation.FromString,
        )
        with pytest.raises(grpc.RpcError) as streamed:  # streams are counted apart
            list(watch(pb.WatchRequest(volume=VOLUME, session="s"), timeout=0.5))
        assert streamed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED

        hold.released.set()
        assert all(f.result().stats.name_max > 0 for f in futures)
        assert statfs(flooding).stats.name_max > 0  # its share is back
    finally:
        other.close()


def test_a_call_past_the_limit_waits_briefly_for_a_slot(held_tree: tuple[Tree, Hold]) -> None:
    tree, hold = held_tree
    call = tree.channel.unary_unary(
        f"/{META_SERVICE}/StatFs",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.StatFsReply.FromString,
    )
    futures = [
        call.future(pb.VolumeRef(volume=VOLUME), timeout=10, metadata=((HOLD, "1"),))
        for _ in range(3)
    ]
    hold.wait_holding(3)
    queued = call.future(pb.VolumeRef(volume=VOLUME), timeout=10)
    time.sleep(0.1)
    hold.released.set()  # within the queue's 0.3 s: the waiting call gets a slot
    assert queued.result().stats.name_max > 0
    assert all(f.result().stats.name_max > 0 for f in futures)


def test_watch_streams_past_their_limit_are_refused_at_once(
    held_tree: tuple[Tree, Hold],
) -> None:
    tree, _ = held_tree
    watch = tree.channel.unary_stream(
        f"/{META_SERVICE}/Watch",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.Invalidation.FromString,
    )
    streams = [watch(pb.WatchRequest(volume=VOLUME, session=f"s{i}"), timeout=5) for i in range(2)]
    try:
        time.sleep(0.3)  # both are being served
        with pytest.raises(grpc.RpcError) as caught:
            list(watch(pb.WatchRequest(volume=VOLUME, session="s3"), timeout=5))
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert statfs(tree.channel).stats.name_max > 0  # calls are counted apart
    finally:
        for s in streams:
            s.cancel()


@FUZZ
@given(peer=st.text(max_size=60))
def test_any_peer_string_names_a_client(peer: str) -> None:
    assert isinstance(client_of(peer), str)


def test_peers_of_one_host_are_one_client() -> None:
    assert client_of("ipv4:10.0.0.7:5000") == client_of("ipv4:10.0.0.7:6000") == "ipv4:10.0.0.7"
    assert client_of("ipv6:%5B::1%5D:5000") == "ipv6:%5B::1%5D"
    assert client_of("unix:/run/x.sock") == client_of("unix:") == "unix"


def test_slots_refuse_past_the_limit_and_the_waiting_queue() -> None:
    slots = ClientSlots(limit=2, wait=0.05)
    assert slots.acquire("a") and slots.acquire("a")
    assert not slots.acquire("a")  # waited 0.05 s, then refused
    assert slots.acquire("b")  # another client's share is its own
    slots.release("a")
    assert slots.acquire("a")
    for c in ("a", "a", "b"):
        slots.release(c)
    assert slots.held("a") == slots.held("b") == 0


def test_a_mount_refused_as_busy_sends_the_call_again(held_tree: tuple[Tree, Hold]) -> None:
    tree, hold = held_tree
    call = tree.channel.unary_unary(
        f"/{META_SERVICE}/StatFs",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.StatFsReply.FromString,
    )
    futures = [
        call.future(pb.VolumeRef(volume=VOLUME), timeout=10, metadata=((HOLD, "1"),))
        for _ in range(3)
    ]
    hold.wait_holding(3)
    threading.Timer(0.6, hold.released.set).start()  # past the server's 0.3 s queue
    meta = GrpcMeta(tree.address, VOLUME)  # the same host: its share is taken
    try:
        assert meta.statfs().name_max > 0  # refused, paused, sent again, answered
    finally:
        meta.close()
    assert all(f.result().stats.name_max > 0 for f in futures)


def test_a_mount_still_refused_after_its_pauses_gets_eagain(
    held_tree: tuple[Tree, Hold],
) -> None:
    tree, hold = held_tree
    call = tree.channel.unary_unary(
        f"/{META_SERVICE}/StatFs",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.StatFsReply.FromString,
    )
    futures = [
        call.future(pb.VolumeRef(volume=VOLUME), timeout=10, metadata=((HOLD, "1"),))
        for _ in range(3)
    ]
    hold.wait_holding(3)
    meta = GrpcMeta(tree.address, VOLUME)
    try:
        with pytest.raises(FsError) as caught:
            meta.statfs()
        assert caught.value.errno == errno.EAGAIN
    finally:
        meta.close()
        hold.released.set()
    assert all(f.result().stats.name_max > 0 for f in futures)
