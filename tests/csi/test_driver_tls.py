"""The driver's own calls to a TLS-only tree service: the controller's CreateVolume and
DeleteVolume with its ``--tls-ca-file``, the node's volume check before a mount with the
material the mount gets (the node-stage secret's ``ca.crt``, else ``--tls-ca-file``).
Without the CA each fails fast as UNAVAILABLE, saying TLS and where the CA comes from."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.tls import load_client_tls
from cloudfs_csi.csi.v1 import csi_pb2 as csi
from testkit.certs import Certs
from testkit.tree_server import TreeServer, running_tree_server
from tests.csi.conftest import require_mounts
from tests.csi.harness import Driver, Kubelet, capability

TOKEN = "csi-tls-token-0123456789"
FAST = 10.0  # seconds a refused TLS call may take (gRPC retries UNAVAILABLE a few times)


@pytest.fixture(scope="module")
def tls_tree(certs: Certs) -> Iterator[TreeServer]:
    args = ("--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key))
    with running_tree_server(token=TOKEN, args=args, tls=load_client_tls(str(certs.ca))) as tree:
        yield tree


def _driver(base: Path, name: str, *args: str) -> Driver:
    require_mounts()
    driver = Driver(base / name, extra_args=list(args))
    driver.base.mkdir()
    driver.start()
    return driver


@pytest.fixture
def with_ca(base: Path, certs: Certs) -> Iterator[Driver]:
    driver = _driver(base, "with-ca", "--tls-ca-file", str(certs.ca))
    yield driver
    driver.stop()


@pytest.fixture
def without_ca(base: Path) -> Iterator[Driver]:
    driver = _driver(base, "without-ca")
    yield driver
    driver.stop()


def _refused(call: object, request: object) -> grpc.RpcError:
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as exc:
        call(request, timeout=60)  # type: ignore[operator]
    assert time.monotonic() - started < FAST
    return exc.value


def test_controller_reaches_a_tls_tree_service_with_its_ca(
    with_ca: Driver, without_ca: Driver, tls_tree: TreeServer, base: Path
) -> None:
    ufs = base / "bucket"
    ufs.mkdir()
    name = "pvc-7d0c7b9e-5d7e-4f43-9a3b-3c1e0b9d2f10"
    create = csi.CreateVolumeRequest(
        name=name, volume_capabilities=[capability()], secrets={"token": TOKEN},
        parameters={"server": tls_tree.address, "ufsUri": f"file://{ufs}"},
    )  # fmt: skip
    refused = _refused(without_ca.controller.CreateVolume, create)
    assert refused.code() == grpc.StatusCode.UNAVAILABLE
    assert "TLS" in (refused.details() or "") and "--tls-ca-file" in (refused.details() or "")

    vol = with_ca.controller.CreateVolume(create, timeout=60).volume
    assert vol.volume_id == f"grpc://{tls_tree.address}/{name}"
    assert with_ca.controller.CreateVolume(create, timeout=60).volume == vol  # a retry

    delete = csi.DeleteVolumeRequest(volume_id=vol.volume_id, secrets={"token": TOKEN})
    refused = _refused(without_ca.controller.DeleteVolume, delete)
    assert refused.code() == grpc.StatusCode.UNAVAILABLE and "TLS" in (refused.details() or "")
    with_ca.controller.DeleteVolume(delete, timeout=60)
    with_ca.controller.DeleteVolume(delete, timeout=60)  # idempotent
    volumes = VolumeClient(tls_tree.address, token=TOKEN, tls=tls_tree.tls)
    try:
        assert name not in {v.name for v in volumes.list()}
    finally:
        volumes.close()


def test_the_controller_refuses_to_start_with_an_unusable_ca(base: Path) -> None:
    driver = Driver(base / "bad", extra_args=["--tls-ca-file", str(base / "missing.crt")])
    driver.base.mkdir()
    with pytest.raises(RuntimeError):
        driver.start()
    assert "missing.crt" in driver.log()


def test_node_checks_the_volume_with_the_mounts_tls_material(
    with_ca: Driver, without_ca: Driver, tls_tree: TreeServer, certs: Certs, base: Path
) -> None:
    ufs = base / "ufs"
    ufs.mkdir()
    (ufs / "hello.txt").write_bytes(b"over TLS")
    ufs.chmod(0o755)
    volume_id = tls_tree.new_volume(f"file://{ufs}")
    context = {"uri": volume_id}

    # No CA anywhere: the check fails, saying TLS and where the CA comes from, and
    # leaves no secret file behind.
    plain = Kubelet(without_ca, base / "kubelet-plain")
    with pytest.raises(grpc.RpcError) as exc:
        plain.stage(volume_id, context, secrets={"token": TOKEN})
    assert exc.value.code() == grpc.StatusCode.UNAVAILABLE
    details = exc.value.details() or ""
    assert "TLS" in details and "ca.crt" in details and "--tls-ca-file" in details
    assert TOKEN not in details
    assert list((without_ca.base / "state" / "secrets").iterdir()) == []

    # The node-stage secret's CA (PEM, written to a 0600 file): check and mount over TLS.
    secrets = {"token": TOKEN, "ca.crt": certs.ca.read_text()}
    staging = plain.stage(volume_id, context, secrets=secrets)
    assert (staging / "hello.txt").read_bytes() == b"over TLS"
    plain.unstage(volume_id, staging)

    # The node plugin's --tls-ca-file when the secret has no CA.
    node = Kubelet(with_ca, base / "kubelet-ca")
    staging = node.stage(volume_id, context, secrets={"token": TOKEN})
    assert (staging / "hello.txt").read_bytes() == b"over TLS"
    node.unstage(volume_id, staging)
