"""The spec's error codes for the bad requests csi-sanity sends, and secrets kept out of sight.

Required fields are checked before any lookup: these requests name a tree
service nobody serves, and still get INVALID_ARGUMENT at once.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cloudfs_csi.csi.v1 import csi_pb2 as csi
from tests.csi.harness import Driver, capability

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
NOWHERE = {"uri": "grpc://127.0.0.1:9/nowhere"}  # a lookup would hang or fail otherwise
SECRET = "s3cr3t-value-that-must-not-leak"


@pytest.fixture(scope="module")
def bare() -> Iterator[Driver]:
    """A driver for requests that never mount anything (no root needed)."""
    with tempfile.TemporaryDirectory(prefix="cloudfs-csi-err-") as tmp:
        d = Driver(Path(tmp))
        d.start()
        try:
            yield d
        finally:
            d.stop()


def _fails(call: Callable[..., Any], request: Any, code: grpc.StatusCode) -> str:
    with pytest.raises(grpc.RpcError) as exc:
        call(request, timeout=5)
    assert exc.value.code() == code, exc.value.details()
    details: str = exc.value.details()
    assert SECRET not in details
    return details


def test_identity(bare: Driver) -> None:
    info = bare.identity.GetPluginInfo(csi.GetPluginInfoRequest())
    assert info.name == "csi.cloudfs.io" and info.vendor_version
    caps = bare.identity.GetPluginCapabilities(csi.GetPluginCapabilitiesRequest())
    assert [c.service.type for c in caps.capabilities] == [
        csi.PluginCapability.Service.CONTROLLER_SERVICE
    ]
    assert bare.identity.Probe(csi.ProbeRequest()).ready.value


def test_node_missing_fields(bare: Driver) -> None:
    node = bare.node
    cap = capability()
    s = {"secrets": {"AWS_SECRET_ACCESS_KEY": SECRET}}
    stage = csi.NodeStageVolumeRequest
    _fails(
        node.NodeStageVolume, stage(staging_target_path="/x", volume_capability=cap, **s), INVALID
    )
    _fails(node.NodeStageVolume, stage(volume_id="v", volume_capability=cap, **s), INVALID)
    _fails(node.NodeStageVolume, stage(volume_id="v", staging_target_path="/x", **s), INVALID)
    _fails(
        node.NodeStageVolume,
        stage(volume_id="v", staging_target_path="rel/x", volume_capability=cap, **s),
        INVALID,
    )
    block = csi.VolumeCapability(
        block=csi.VolumeCapability.BlockVolume(),
        access_mode=csi.VolumeCapability.AccessMode(mode=1),  # type: ignore[arg-type]
    )
    _fails(
        node.NodeStageVolume,
        stage(volume_id="v", staging_target_path="/x", volume_capability=block,
              volume_context=NOWHERE),
        INVALID,
    )  # fmt: skip
    pub = csi.NodePublishVolumeRequest
    full = {"volume_id": "v", "staging_target_path": "/s", "target_path": "/t",
            "volume_capability": cap, "volume_context": NOWHERE}  # fmt: skip
    for missing in ("volume_id", "staging_target_path", "target_path", "volume_capability"):
        args = {k: v for k, v in full.items() if k != missing}
        _fails(node.NodePublishVolume, pub(**args), INVALID)  # type: ignore[arg-type]
    _fails(node.NodeUnpublishVolume, csi.NodeUnpublishVolumeRequest(target_path="/t"), INVALID)
    _fails(node.NodeUnpublishVolume, csi.NodeUnpublishVolumeRequest(volume_id="v"), INVALID)
    unstage = csi.NodeUnstageVolumeRequest
    _fails(node.NodeUnstageVolume, unstage(staging_target_path="/s"), INVALID)
    _fails(node.NodeUnstageVolume, unstage(volume_id="v"), INVALID)
    stats = csi.NodeGetVolumeStatsRequest
    _fails(node.NodeGetVolumeStats, stats(volume_path="/t"), INVALID)
    _fails(node.NodeGetVolumeStats, stats(volume_id="v"), INVALID)


def test_node_unknown_volume(bare: Driver, tmp_path: Path) -> None:
    node = bare.node
    cap = capability()
    _fails(
        node.NodeStageVolume,
        csi.NodeStageVolumeRequest(
            volume_id="some-vol-id", staging_target_path=str(tmp_path / "s"),
            volume_capability=cap,
        ),
        NOT_FOUND,
    )  # fmt: skip
    _fails(
        node.NodeStageVolume,
        csi.NodeStageVolumeRequest(
            volume_id="v", staging_target_path=str(tmp_path / "s"), volume_capability=cap,
            volume_context={"uri": f"file://{tmp_path}/missing"},
        ),
        NOT_FOUND,
    )  # fmt: skip
    _fails(
        node.NodePublishVolume,
        csi.NodePublishVolumeRequest(
            volume_id="some-vol-id", staging_target_path=str(tmp_path / "s"),
            target_path=str(tmp_path / "t"), volume_capability=cap,
        ),
        NOT_FOUND,
    )  # fmt: skip
    _fails(
        node.NodeGetVolumeStats,
        csi.NodeGetVolumeStatsRequest(volume_id="some-vol-id", volume_path=str(tmp_path)),
        NOT_FOUND,
    )
    # Tearing down what is not there succeeds (kubelet retries after a restart).
    node.NodeUnpublishVolume(
        csi.NodeUnpublishVolumeRequest(volume_id="some-vol-id", target_path=str(tmp_path / "t"))
    )
    node.NodeUnstageVolume(
        csi.NodeUnstageVolumeRequest(volume_id="some-vol-id", staging_target_path=str(tmp_path))
    )
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_controller_missing_fields(bare: Driver) -> None:
    ctl = bare.controller
    params = {"server": "127.0.0.1:9", "ufsUri": "s3://bucket/pvs"}
    secrets = {"token": SECRET}
    create = csi.CreateVolumeRequest
    cap = capability()
    _fails(ctl.CreateVolume, create(volume_capabilities=[cap], parameters=params,
                                    secrets=secrets), INVALID)  # fmt: skip
    _fails(ctl.CreateVolume, create(name="pvc-1", parameters=params, secrets=secrets), INVALID)
    details = _fails(
        ctl.CreateVolume, create(name="pvc-1", volume_capabilities=[cap], secrets=secrets), INVALID
    )
    assert "server" in details
    _fails(
        ctl.CreateVolume,
        create(name="pvc-1", volume_capabilities=[cap], parameters={**params, "bogus": "1"}),
        INVALID,
    )
    _fails(
        ctl.CreateVolume,
        create(
            name="pvc-1", volume_capabilities=[cap], parameters=params,
            capacity_range=csi.CapacityRange(required_bytes=10, limit_bytes=5),
        ),
        grpc.StatusCode.OUT_OF_RANGE,
    )  # fmt: skip
    _fails(ctl.DeleteVolume, csi.DeleteVolumeRequest(secrets=secrets), INVALID)
    validate = csi.ValidateVolumeCapabilitiesRequest
    _fails(ctl.ValidateVolumeCapabilities, validate(volume_capabilities=[cap]), INVALID)
    _fails(ctl.ValidateVolumeCapabilities, validate(volume_id="grpc://127.0.0.1:9/v"), INVALID)
    _fails(
        ctl.ValidateVolumeCapabilities,
        validate(volume_id="some-vol-id", volume_capabilities=[cap]),
        NOT_FOUND,
    )
    # Deleting a volume that is not one of ours succeeds, as the spec asks.
    ctl.DeleteVolume(csi.DeleteVolumeRequest(volume_id="some-vol-id"))
    caps = ctl.ControllerGetCapabilities(csi.ControllerGetCapabilitiesRequest())
    rpc = csi.ControllerServiceCapability.RPC
    assert rpc.CREATE_DELETE_VOLUME in [c.rpc.type for c in caps.capabilities]


def test_secrets_never_reach_the_log(bare: Driver) -> None:
    assert SECRET not in bare.log()
    assert "***stripped***" in bare.log()
