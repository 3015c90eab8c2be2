"""A grpc:// mount of a tree service that serves mTLS and wants a token: the mount's
--tls-ca/--tls-cert/--tls-key and --token-file, a file read through it, a mount
without the CA refused at start with an error that says TLS, and a mount serving
its blocks to the group over TLS (docs/security.md)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudfs.cache.interface import BlockAsk
from cloudfs.config import MiB
from cloudfs.metrics import Metrics
from cloudfs.peers.client import PeerGroup
from cloudfs.tls import load_client_tls
from cloudfs.ufs.local import LocalObjectStore
from testkit.certs import Certs
from testkit.mounts import Backing, mounted, world_traversable_tmpdir
from testkit.servers import free_port
from testkit.tree_server import TreeServer, running_tree_server

TOKEN = "mount-tls-token"


@pytest.fixture(scope="module")
def mtls_tree(certs: Certs) -> Iterator[TreeServer]:
    flags = (
        "--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key),
        "--tls-client-ca", str(certs.ca),
    )  # fmt: skip
    tls = load_client_tls(str(certs.ca), str(certs.client_cert), str(certs.client_key))
    with running_tree_server(token=TOKEN, args=flags, tls=tls) as tree:
        yield tree


@pytest.fixture
def backing(mtls_tree: TreeServer) -> Iterator[Backing]:
    data = world_traversable_tmpdir("cloudfs-ufs-")
    (data / "train").mkdir()
    (data / "train" / "0001.bin").write_bytes(b"sample over TLS" * 1000)
    try:
        yield Backing(uri=mtls_tree.new_volume(f"file://{data}"), local_dir=data)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def test_a_mount_reads_through_an_mtls_tree_service(
    mtls_tree: TreeServer, certs: Certs, backing: Backing
) -> None:
    assert mtls_tree.token_file is not None
    options = [
        "--token-file", mtls_tree.token_file,
        "-o", f"tls_ca={certs.ca},tls_cert={certs.client_cert},tls_key={certs.client_key}",
    ]  # fmt: skip
    with mounted(backing, options) as mount:
        assert (mount.root / "train" / "0001.bin").read_bytes() == b"sample over TLS" * 1000
        (mount.root / "train" / "new.txt").write_bytes(b"written over TLS")
        assert (mount.root / "train" / "new.txt").read_bytes() == b"written over TLS"


def test_a_mount_without_the_ca_fails_at_start_saying_tls(
    mtls_tree: TreeServer, backing: Backing, tmp_path: Path
) -> None:
    assert mtls_tree.token_file is not None
    with (
        pytest.raises(RuntimeError, match=r"TLS|tls_ca"),
        mounted(backing, ["--token-file", mtls_tree.token_file]),
    ):
        pass


def test_a_serving_mount_serves_its_blocks_over_tls(
    mtls_tree: TreeServer, certs: Certs, backing: Backing
) -> None:
    assert mtls_tree.token_file is not None and backing.local_dir is not None
    serve = f"127.0.0.1:{free_port()}"
    options = [
        "--token-file", mtls_tree.token_file, "--tls-ca", str(certs.ca),
        "--tls-cert", str(certs.client_cert), "--tls-key", str(certs.client_key),
        "--cache-peers", serve, "--cache-group-serve", serve,
        "--cache-group-serve-cert", str(certs.server_cert),
        "--cache-group-serve-key", str(certs.server_key),
    ]  # fmt: skip
    key = "train/0001.bin"
    info = LocalObjectStore(str(backing.local_dir)).head(key)
    ask = BlockAsk(key, info.etag, info.size, 4 * MiB, 0, f"{key}#0", info.size)
    store_uri = f"file://{backing.local_dir}"
    with mounted(backing, options):
        group = PeerGroup([serve], store_uri, Metrics(), tls=load_client_tls(str(certs.ca)))
        plain = PeerGroup([serve], store_uri, Metrics())
        try:
            assert group.fetch([ask]) == [b"sample over TLS" * 1000]
            assert plain.fetch([ask]) == [None]  # a plaintext caller gets nothing
        finally:
            group.close()
            plain.close()
