"""Dynamic provisioning on a real tree service, then the node mounting what it made."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from cloudfs.meta.client.volumes import VolumeClient
from cloudfs_csi.csi.v1 import csi_pb2 as csi
from testkit.tree_server import TreeServer
from tests.csi.harness import Driver, Kubelet, capability


def _create(
    driver: Driver, name: str, params: dict[str, str], token: str, size: int = 1 << 30
) -> csi.CreateVolumeResponse:
    reply: csi.CreateVolumeResponse = driver.controller.CreateVolume(
        csi.CreateVolumeRequest(
            name=name, volume_capabilities=[capability()], parameters=params,
            secrets={"token": token}, capacity_range=csi.CapacityRange(required_bytes=size),
        ), timeout=30,
    )  # fmt: skip
    return reply


def test_provision_mount_and_delete(
    kubelet: Kubelet, driver: Driver, tree_server: TreeServer, base: Path
) -> None:
    ufs = base / "bucket"
    ufs.mkdir()
    token = tree_server.token
    assert token is not None
    params = {
        "server": tree_server.address, "ufsUri": f"file://{ufs}", "fileMode": "0640",
        "csi.storage.k8s.io/pvc/name": "data",  # the provisioner's own keys are ignored
    }  # fmt: skip
    name = "pvc-0b4c3f4e-8f7e-4d0e-9a59-2f0d4a8e1c11"
    vol = _create(driver, name, params, token).volume
    assert vol.volume_id == f"grpc://{tree_server.address}/{name}"
    assert vol.capacity_bytes == 1 << 30
    again = _create(driver, name, params, token).volume  # the provisioner retries
    assert again == vol
    for other in ({**params, "subPath": "false"}, params):
        with pytest.raises(grpc.RpcError) as exc:
            _create(driver, name, other, token, size=(2 << 30) if other is params else 1 << 30)
        assert exc.value.code() == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(grpc.RpcError) as exc:
        _create(driver, "pvc-other", params, "wrong-token")
    assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "wrong-token" not in (exc.value.details() or "")

    valid = driver.controller.ValidateVolumeCapabilities(
        csi.ValidateVolumeCapabilitiesRequest(
            volume_id=vol.volume_id, volume_capabilities=[capability()],
            volume_context=dict(vol.volume_context), secrets={"token": token},
        )
    )  # fmt: skip
    assert list(valid.confirmed.volume_capabilities) == [capability()]

    (ufs / name / "from-ufs.bin").write_bytes(b"x")  # an object the tree has no mode for
    ctx = dict(vol.volume_context)
    staging = kubelet.stage(vol.volume_id, ctx, secrets={"token": token})
    target = kubelet.publish(vol.volume_id, staging, ctx)
    (target / "epoch-1.ckpt").write_bytes(b"checkpoint")
    assert (ufs / name / "epoch-1.ckpt").read_bytes() == b"checkpoint"  # its own sub-path
    assert (target / "from-ufs.bin").stat().st_mode & 0o777 == 0o640  # fileMode
    kubelet.unpublish(vol.volume_id, target)
    kubelet.unstage(vol.volume_id, staging)

    delete = csi.DeleteVolumeRequest(volume_id=vol.volume_id, secrets={"token": token})
    driver.controller.DeleteVolume(delete)
    driver.controller.DeleteVolume(delete)  # idempotent
    client = VolumeClient(tree_server.address, token=token)
    try:
        assert name not in [v.name for v in client.list()]
    finally:
        client.close()
    assert (ufs / name / "epoch-1.ckpt").exists()  # deleting the tree keeps the data
    with pytest.raises(grpc.RpcError) as exc:
        kubelet.stage(vol.volume_id, ctx, secrets={"token": token})
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND
    assert token not in driver.log()
