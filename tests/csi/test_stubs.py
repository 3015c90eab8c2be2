"""The CSI stubs: what proto/generate.sh makes of proto/csi/v1/csi.proto, with spec numbers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cloudfs_csi.csi.v1 import csi_pb2 as csi

REPO = Path(__file__).resolve().parents[2]
STUBS = REPO / "csi-driver" / "cloudfs_csi" / "csi" / "v1"


def test_the_committed_stubs_match_the_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="needs grpcio-tools (the [test] extra)")
    (tmp_path / "cloudfs" / "v1").mkdir(parents=True)
    subprocess.run(
        ["bash", str(REPO / "proto" / "generate.sh"), str(tmp_path)], check=True, timeout=120
    )
    fresh = tmp_path / "csi-driver" / "cloudfs_csi" / "csi" / "v1"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in STUBS.iterdir() if p.is_file())
    for name in names:
        assert (fresh / name).read_text() == (STUBS / name).read_text(), f"{name}: regenerate"


def _numbers(message: type) -> dict[str, int]:
    return {f.name: f.number for f in message.DESCRIPTOR.fields}  # type: ignore[attr-defined]


def test_wire_names_and_field_numbers_are_the_specs() -> None:
    assert csi.DESCRIPTOR.package == "csi.v1"
    services = {
        s.name: [m.name for m in s.methods] for s in csi.DESCRIPTOR.services_by_name.values()
    }
    assert set(services) == {"Identity", "Controller", "Node"}
    assert "NodeStageVolume" in services["Node"] and "CreateVolume" in services["Controller"]
    assert _numbers(csi.NodeStageVolumeRequest) == {
        "volume_id": 1, "publish_context": 2, "staging_target_path": 3,
        "volume_capability": 4, "secrets": 5, "volume_context": 6,
    }  # fmt: skip
    assert _numbers(csi.NodePublishVolumeRequest) == {
        "volume_id": 1, "publish_context": 2, "staging_target_path": 3, "target_path": 4,
        "volume_capability": 5, "readonly": 6, "secrets": 7, "volume_context": 8,
    }  # fmt: skip
    assert _numbers(csi.CreateVolumeRequest) == {
        "name": 1, "capacity_range": 2, "volume_capabilities": 3, "parameters": 4,
        "secrets": 5, "volume_content_source": 6, "accessibility_requirements": 7,
    }  # fmt: skip
    assert _numbers(csi.Volume) == {
        "capacity_bytes": 1, "volume_id": 2, "volume_context": 3, "content_source": 4,
        "accessible_topology": 5,
    }  # fmt: skip
    assert _numbers(csi.NodeGetVolumeStatsRequest) == {
        "volume_id": 1, "volume_path": 2, "staging_target_path": 3,
    }  # fmt: skip
    assert _numbers(csi.VolumeCapability) == {"block": 1, "mount": 2, "access_mode": 3}
    mode = csi.VolumeCapability.AccessMode
    assert (mode.MULTI_NODE_MULTI_WRITER, mode.SINGLE_NODE_MULTI_WRITER) == (5, 7)
    node_rpc = csi.NodeServiceCapability.RPC
    assert (node_rpc.GET_VOLUME_STATS, node_rpc.VOLUME_CONDITION) == (2, 4)
    secret = csi.DeleteVolumeRequest.DESCRIPTOR.fields_by_name["secrets"]
    assert secret.GetOptions().Extensions[csi.csi_secret]
