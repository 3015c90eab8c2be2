"""Hostile requests to the CSI driver: a proper gRPC status, never INTERNAL or a crash.

A real driver process (node and controller, no mounter: nothing is ever mounted)
gets requests with volume ids empty, huge or with NUL; paths relative, with NUL
or '..' (absolute ones only under the test's own directory: NodeUnpublishVolume
removes what it is named); capabilities absent, of unknown access modes or with
odd mount flags; contexts naming a tree service nobody serves. Its log must hold
no traceback, and it must still answer a Probe.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudfs_csi.csi.v1 import csi_pb2 as csi
from tests.csi.harness import Driver
from tests.fuzz.strategies import FUZZ, TEXT, messages

NOWHERE = "grpc://127.0.0.1:9/nowhere"
PROPER = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNAVAILABLE,  # the tree service named is not there
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
}
CALLS: dict[str, tuple[str, Any]] = {
    "CreateVolume": ("controller", csi.CreateVolumeRequest),
    "DeleteVolume": ("controller", csi.DeleteVolumeRequest),
    "ValidateVolumeCapabilities": ("controller", csi.ValidateVolumeCapabilitiesRequest),
    "ControllerGetCapabilities": ("controller", csi.ControllerGetCapabilitiesRequest),
    "NodeStageVolume": ("node", csi.NodeStageVolumeRequest),
    "NodeUnstageVolume": ("node", csi.NodeUnstageVolumeRequest),
    "NodePublishVolume": ("node", csi.NodePublishVolumeRequest),
    "NodeUnpublishVolume": ("node", csi.NodeUnpublishVolumeRequest),
    "NodeGetVolumeStats": ("node", csi.NodeGetVolumeStatsRequest),
    "NodeGetCapabilities": ("node", csi.NodeGetCapabilitiesRequest),
    "NodeGetInfo": ("node", csi.NodeGetInfoRequest),
    "GetPluginInfo": ("identity", csi.GetPluginInfoRequest),
    "Probe": ("identity", csi.ProbeRequest),
}
PATH_FIELDS = ("staging_target_path", "target_path", "volume_path")
CONTEXT_FIELDS = ("volume_context", "parameters", "publish_context")


@pytest.fixture(scope="module")
def driver() -> Iterator[Driver]:
    with tempfile.TemporaryDirectory(prefix="cloudfs-csi-fuzz-") as tmp:
        d = Driver(Path(tmp))
        d.start()
        try:
            yield d
        finally:
            d.stop()


def _paths(base: Path) -> st.SearchStrategy[str]:
    inside = TEXT.filter(lambda t: "/" not in t and ".." not in t)
    return st.one_of(
        inside.map(lambda t: f"{base}/fuzz/{t}"),  # absolute: only under the test's directory
        TEXT.filter(lambda t: not t.startswith("/")),  # relative, empty
        st.sampled_from([f"{base}/fuzz/a\x00b", f"{base}/fuzz/" + "x" * 5000]),
    )


def _context() -> st.SearchStrategy[dict[str, str]]:
    keys = st.sampled_from(["uri", "volume", "token", "cache", "readOnly", "x"]) | TEXT
    values = st.sampled_from([NOWHERE, "grpc://", "s3://b/p", "true", "-1"]) | TEXT
    return st.dictionaries(keys, values, max_size=4)


def _request(name: str, base: Path) -> st.SearchStrategy[Any]:
    request_type = CALLS[name][1]
    fields = request_type.DESCRIPTOR.fields_by_name
    overrides: dict[str, st.SearchStrategy[Any]] = {
        f: _paths(base) for f in PATH_FIELDS if f in fields
    }
    for f in CONTEXT_FIELDS:
        if f in fields:
            overrides[f] = _context()
    if "secrets" in fields:
        overrides["secrets"] = st.dictionaries(TEXT, TEXT, max_size=2)
    if "volume_id" in fields:
        overrides["volume_id"] = st.one_of(
            st.sampled_from(["vol-1", "", "x" * 200, "a\x00b", "../x"]), TEXT
        )
    return messages(request_type.DESCRIPTOR, overrides).map(lambda kw: request_type(**kw))


def _stub(driver: Driver, kind: str) -> Any:
    return getattr(driver, kind)


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(CALLS)))
def test_csi_requests(driver: Driver, data: st.DataObject, name: str) -> None:
    request = data.draw(_request(name, driver.base), label="request")
    before = driver.log().count("Traceback")
    try:
        getattr(_stub(driver, CALLS[name][0]), name)(request, timeout=15)
    except grpc.RpcError as exc:
        assert exc.code() in PROPER, f"{name}: {exc.code()} {exc.details()}"
    assert driver.log().count("Traceback") == before, driver.log()[-3000:]
    driver.identity.Probe(csi.ProbeRequest(), timeout=5)
