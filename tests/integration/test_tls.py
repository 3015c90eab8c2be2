"""TLS on every network service, the plaintext rule, and token rotation (docs/security.md).

Real processes on loopback: ``cloudfs meta serve``, ``cloudfs cache serve`` and
``cloudfs gateway s3`` started with ``--tls-cert``/``--tls-key`` (and
``--tls-client-ca``), reached through the project's own clients (``GrpcMeta``,
``VolumeClient``, ``PeerGroup``) and boto3; certificates made per module by
``testkit/certs.py``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from cloudfs.cache.interface import BlockAsk
from cloudfs.errors import AccessDenied, RemoteIOError, UsageError
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.metrics import Metrics
from cloudfs.peers.client import PeerGroup
from cloudfs.tls import ClientTLS, check_listener, is_loopback, load_client_tls
from cloudfs.tokens import CHECK_SECONDS, TokenFile
from cloudfs.types import ROOT_INODE
from cloudfs.ufs.local import LocalObjectStore
from testkit.cache_workers import running_cache_worker
from testkit.certs import Certs
from testkit.tree_server import TreeServer, running_tree_server
from tests.gateway.conftest import ACCESS_KEY, REPO, SECRET_KEY, gateway_command, gateway_env

BS = 64 * 1024
FAST = 8.0  # seconds a refused TLS client may take (gRPC retries UNAVAILABLE a few times)


def server_flags(certs: Certs, *, mtls: bool = False) -> tuple[str, ...]:
    flags = ("--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key))
    return (*flags, "--tls-client-ca", str(certs.ca)) if mtls else flags


def trusting(certs: Certs, *, client_cert: bool = False) -> ClientTLS:
    tls = (
        load_client_tls(str(certs.ca), str(certs.client_cert), str(certs.client_key))
        if client_cert
        else load_client_tls(str(certs.ca))
    )
    assert tls is not None
    return tls


@pytest.fixture(scope="module")
def tls_tree(certs: Certs) -> Iterator[TreeServer]:
    with running_tree_server(args=server_flags(certs), tls=trusting(certs)) as tree:
        yield tree


@pytest.fixture(scope="module")
def mtls_tree(certs: Certs) -> Iterator[TreeServer]:
    with running_tree_server(
        args=server_flags(certs, mtls=True), tls=trusting(certs, client_cert=True)
    ) as tree:
        yield tree


def refused(address: str, tls: ClientTLS | None) -> tuple[str, float]:
    """What listing the volumes of ``address`` with ``tls`` fails with, and how long it took."""
    client = VolumeClient(address, tls=tls, timeout=10.0)
    started = time.monotonic()
    try:
        with pytest.raises(RemoteIOError) as caught:
            client.list()
    finally:
        client.close()
    return str(caught.value), time.monotonic() - started


# -- the tree service ----------------------------------------------------------------


def test_grpc_meta_reads_a_volume_over_tls(
    tls_tree: TreeServer, certs: Certs, tmp_path: Path
) -> None:
    (tmp_path / "hello.txt").write_bytes(b"over TLS")
    uri = tls_tree.new_volume(f"file://{tmp_path}")
    meta = GrpcMeta(tls_tree.address, uri.rsplit("/", 1)[1], tls=trusting(certs))
    try:
        meta.start_session()
        attr = meta.lookup(ROOT_INODE, b"hello.txt")
        assert attr.size == len(b"over TLS")
    finally:
        meta.close()


def test_a_plaintext_client_is_refused_fast_with_a_tls_hint(tls_tree: TreeServer) -> None:
    message, took = refused(tls_tree.address, None)
    assert "TLS" in message or "tls_ca" in message
    assert took < FAST


def test_a_client_trusting_another_ca_is_refused(tls_tree: TreeServer, certs: Certs) -> None:
    message, took = refused(tls_tree.address, load_client_tls(str(certs.other_ca)))
    assert "TLS" in message
    assert took < FAST


def test_mtls_refuses_a_client_without_a_certificate(mtls_tree: TreeServer, certs: Certs) -> None:
    message, took = refused(mtls_tree.address, trusting(certs))
    assert "tls_cert" in message or "TLS" in message
    assert took < FAST


def test_mtls_accepts_a_client_with_a_certificate_of_its_ca(
    mtls_tree: TreeServer, certs: Certs, tmp_path: Path
) -> None:
    uri = mtls_tree.new_volume(f"file://{tmp_path}")  # the fixture's client has the cert
    client = VolumeClient(mtls_tree.address, tls=trusting(certs, client_cert=True))
    try:
        assert uri.rsplit("/", 1)[1] in {v.name for v in client.list()}
    finally:
        client.close()


# -- the plaintext rule ------------------------------------------------------------


def test_the_plaintext_rule() -> None:
    log = logging.getLogger("test")
    for loopback in ("127.0.0.1:7070", "127.3.4.5:1", "[::1]:7070", "localhost:1", "unix:/s"):
        assert is_loopback(loopback)
        check_listener(loopback, None, insecure=False, log=log)
    for remote in ("0.0.0.0:7070", "10.0.0.5:7070", "[::]:7070", "tree.example:7070"):
        assert not is_loopback(remote)
        with pytest.raises(UsageError, match=r"--tls-cert.*--insecure"):
            check_listener(remote, None, insecure=False, log=log)


def test_insecure_allows_a_plaintext_listener_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        check_listener("0.0.0.0:7070", None, insecure=True, log=logging.getLogger("test"))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "INSECURE" in warnings[0].getMessage()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", *args],
        capture_output=True, text=True, timeout=60, cwd=REPO,
        env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)},
    )  # fmt: skip


@pytest.mark.parametrize("service", ["meta", "cache", "gateway"])
def test_each_server_refuses_plaintext_beyond_loopback_before_listening(
    service: str, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    args = {
        "meta": [
            "meta",
            "serve",
            "--engine",
            f"lmdb://{tmp_path}/tree",
            "--token-file",
            str(token),
        ],
        "cache": ["cache", "serve", "--cache-dir", str(tmp_path / "c"), "--token-file", str(token)],
        "gateway": ["gateway", "s3", "--meta", "127.0.0.1:1"],
    }[service]
    env = {"CLOUDFS_GATEWAY_ACCESS_KEY": ACCESS_KEY, "CLOUDFS_GATEWAY_SECRET_KEY": SECRET_KEY}
    done = cli(*args, "--listen", "0.0.0.0:0", env=env)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "--tls-cert" in lines[0] and "--insecure" in lines[0]


def test_a_bad_certificate_file_is_one_line_at_start(tmp_path: Path, certs: Certs) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    base = ["meta", "serve", "--engine", f"lmdb://{tmp_path}/tree", "--token-file", str(token)]
    missing = cli(
        *base, "--tls-cert", str(tmp_path / "nope.pem"), "--tls-key", str(certs.server_key)
    )
    assert missing.returncode != 0 and "nope.pem" in missing.stderr
    mismatched = cli(
        *base, "--tls-cert", str(certs.server_cert), "--tls-key", str(certs.client_key)
    )
    assert mismatched.returncode != 0 and "does not match" in mismatched.stderr
    for done in (missing, mismatched):
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_insecure_starts_a_plaintext_listener_with_one_warning(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    log_path = tmp_path / "log"
    cmd = [
        sys.executable, "-m", "cloudfs.cli.main", "meta", "serve", "--engine",
        f"lmdb://{tmp_path}/tree", "--token-file", str(token), "--listen", "0.0.0.0:0",
        "--insecure",
    ]  # fmt: skip
    with open(log_path, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("listening on ")
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert log_path.read_text().count("INSECURE") == 1


# -- cache workers -------------------------------------------------------------------


def asks(store_dir: Path, key: str) -> list[BlockAsk]:
    info = LocalObjectStore(str(store_dir)).head(key)
    count = (info.size + BS - 1) // BS
    return [
        BlockAsk(key, info.etag, info.size, BS, i, f"{key}#{i}", min(BS, info.size - i * BS))
        for i in range(count)
    ]


def fetched(
    address: str, store_dir: Path, key: str, *, tls: ClientTLS | None, token: str | None = None
) -> bytes | None:
    group = PeerGroup([address], f"file://{store_dir}", Metrics(), token=token, tls=tls)
    try:
        blocks = group.fetch(asks(store_dir, key))
    finally:
        group.close()
    return None if any(b is None for b in blocks) else b"".join(b or b"" for b in blocks)


def test_a_cache_worker_serves_blocks_over_tls(certs: Certs, tmp_path: Path) -> None:
    data = os.urandom(3 * BS + 5)
    (tmp_path / "obj").write_bytes(data)
    options = ["--allow-file-stores", *server_flags(certs)]
    with running_cache_worker(dict(os.environ), options=options) as worker:
        assert fetched(worker.address, tmp_path, "obj", tls=trusting(certs)) == data
        assert fetched(worker.address, tmp_path, "obj", tls=None) is None  # plaintext: refused
        other = load_client_tls(str(certs.other_ca))
        assert fetched(worker.address, tmp_path, "obj", tls=other) is None
        assert fetched(worker.address, tmp_path, "obj", tls=trusting(certs)) == data  # still up


def test_a_cache_worker_with_mtls_wants_a_client_certificate(certs: Certs, tmp_path: Path) -> None:
    data = os.urandom(BS)
    (tmp_path / "obj").write_bytes(data)
    options = ["--allow-file-stores", *server_flags(certs, mtls=True)]
    with running_cache_worker(dict(os.environ), options=options) as worker:
        assert fetched(worker.address, tmp_path, "obj", tls=trusting(certs)) is None
        mine = trusting(certs, client_cert=True)
        assert fetched(worker.address, tmp_path, "obj", tls=mine) == data


# -- the S3 gateway ------------------------------------------------------------------


def test_the_gateway_serves_https_to_boto3(
    tls_tree: TreeServer, certs: Certs, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "k.txt").write_bytes(b"gateway over TLS")
    volume = tls_tree.new_volume(f"file://{data_dir}").rsplit("/", 1)[1]
    cmd = gateway_command(
        "--listen", "127.0.0.1:0", "--staging-dir", str(tmp_path / "staging"),
        "--meta-tls-ca", str(certs.ca), *server_flags(certs),
    )  # fmt: skip
    log_path = tmp_path / "gateway.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=gateway_env(tls_tree), cwd=REPO
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on "), log_path.read_text()
        s3 = boto3.client(
            "s3",
            endpoint_url=f"https://{line.split()[-1]}",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
            verify=str(certs.ca),
            config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"),
        )
        assert s3.get_object(Bucket=volume, Key="k.txt")["Body"].read() == b"gateway over TLS"
        s3.put_object(Bucket=volume, Key="new.txt", Body=b"written")
        assert s3.get_object(Bucket=volume, Key="new.txt")["Body"].read() == b"written"
    finally:
        proc.terminate()
        proc.wait(timeout=15)


# -- token rotation ------------------------------------------------------------------


def rotate(path: Path, token: str) -> None:
    """Replace the file as a Kubernetes Secret update does: a new file renamed over it."""
    new = path.with_name(path.name + ".new")
    new.write_text(token)
    os.replace(new, path)


def test_the_tree_service_follows_its_rotated_token_file(tmp_path: Path) -> None:
    with running_tree_server(token="first-token") as tree:
        assert tree.token_file is not None
        VolumeClient(tree.address, token="first-token").list()
        rotate(Path(tree.token_file), "second-token")
        VolumeClient(tree.address, token="second-token").list()  # at once
        time.sleep(CHECK_SECONDS + 0.2)  # the old one: until the server next looks
        with pytest.raises(AccessDenied):
            VolumeClient(tree.address, token="first-token").list()
        # A client reading its own token file follows a rotation without a restart too.
        mine = tmp_path / "client-token"
        mine.write_text("second-token")
        client = VolumeClient(tree.address, token=TokenFile(str(mine)))
        client.list()
        rotate(Path(tree.token_file), "third-token")
        rotate(mine, "third-token")
        client.list()  # refused once with the old token, then sent again with the new
        client.close()


def test_a_cache_worker_follows_its_rotated_token_file(tmp_path: Path) -> None:
    data = os.urandom(BS)
    (tmp_path / "obj").write_bytes(data)
    with running_cache_worker(
        dict(os.environ), token="first-token", options=["--allow-file-stores"]
    ) as worker:
        assert worker.token_file is not None
        assert fetched(worker.address, tmp_path, "obj", tls=None, token="first-token") == data
        rotate(worker.token_file, "second-token")
        assert fetched(worker.address, tmp_path, "obj", tls=None, token="second-token") == data
        time.sleep(CHECK_SECONDS + 0.2)
        assert fetched(worker.address, tmp_path, "obj", tls=None, token="first-token") is None
