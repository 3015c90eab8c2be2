"""The etcd engine over TLS: a real etcd with ``--client-cert-auth``, reached from
``etcd://...?cacert=&cert=&key=`` by the engine and by ``cloudfs meta serve``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudfs.errors import StartupError
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.engine.kv_etcd import open_engine
from cloudfs.types import ROOT_INODE
from testkit.certs import Certs
from testkit.etcd import EtcdCluster, require_etcd, running_etcd
from testkit.tree_server import running_tree_server

REFUSED_WITHIN = 1.0  # seconds of failover before a refused engine gives up


@pytest.fixture(scope="module")
def tls_etcd(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    require_etcd()
    with running_etcd(tmp_path_factory.mktemp("etcd-tls"), tls=certs) as cluster:
        yield cluster


def uri(cluster: EtcdCluster, query: str, prefix: str = "tls-test/") -> str:
    hosts = ",".join(e.removeprefix("https://") for e in cluster.endpoints)
    return f"etcd://{hosts}/{prefix}?{query}"


def with_client_cert(certs: Certs, ca: Path | None = None) -> str:
    return f"cacert={ca or certs.ca}&cert={certs.client_cert}&key={certs.client_key}"


def test_the_engine_reads_and_writes_over_tls_with_a_client_certificate(
    tls_etcd: EtcdCluster, certs: Certs
) -> None:
    engine = open_engine(uri(tls_etcd, with_client_cert(certs) + "&server-name=localhost"))
    try:
        with engine.transaction(write=True) as txn:
            txn.put(b"k", b"over TLS")
        with engine.transaction(write=False) as txn:
            assert txn.get(b"k") == b"over TLS"
    finally:
        engine.close()


@pytest.mark.parametrize("who", ["plaintext", "no client certificate", "another CA"])
def test_clients_etcd_would_not_trust_or_that_would_not_trust_it_fail_to_start(
    tls_etcd: EtcdCluster, certs: Certs, who: str
) -> None:
    query, hint = {
        "plaintext": ("", "add ?cacert="),
        "no client certificate": (f"cacert={certs.ca}", "add cert= and key="),
        "another CA": (with_client_cert(certs, certs.other_ca), "CERTIFICATE_VERIFY_FAILED"),
    }[who]
    target = uri(tls_etcd, query).removesuffix("?")
    with pytest.raises(StartupError, match="cannot reach etcd") as caught:
        open_engine(target, timeout=REFUSED_WITHIN, retry_for=REFUSED_WITHIN)
    assert hint in str(caught.value)


def test_the_tree_service_serves_a_volume_from_a_tls_etcd(
    tls_etcd: EtcdCluster, certs: Certs, tmp_path: Path
) -> None:
    (tmp_path / "hello.txt").write_bytes(b"hello")
    with running_tree_server(uri(tls_etcd, with_client_cert(certs), "tree/")) as tree:
        volume = tree.new_volume(f"file://{tmp_path}").rsplit("/", 1)[1]
        meta = GrpcMeta(tree.address, volume)
        try:
            meta.start_session()
            assert meta.lookup(ROOT_INODE, b"hello.txt").size == 5
        finally:
            meta.close()


def test_meta_serve_says_what_is_wrong_with_the_uri_in_one_line(certs: Certs) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "meta", "serve", "--no-token",
         "--engine", f"etcd://127.0.0.1:1/?cacert={certs.ca}&colour=red"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "unknown parameter 'colour'" in proc.stderr


def test_meta_serve_refused_by_etcd_says_so_in_one_line(
    tls_etcd: EtcdCluster, certs: Certs
) -> None:
    """No lines of gRPC's own on stderr: the command's line carries the handshake's reason."""
    proc = subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "meta", "serve", "--no-token",
         "--engine", uri(tls_etcd, f"cacert={certs.ca}")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("cloudfs: cannot reach etcd")
    assert "add cert= and key=" in proc.stderr
