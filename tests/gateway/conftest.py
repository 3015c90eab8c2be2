"""Fixtures of the gateway tests: a real tree service, a real ``cloudfs gateway s3``
subprocess serving every volume of it (with keys), fresh volumes, and clients."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from testkit.mounts import world_traversable_tmpdir
from testkit.servers import S3Server, free_port
from testkit.tree_server import TreeServer, running_tree_server

ACCESS_KEY = "gateway-access"
SECRET_KEY = "gateway-secret-key"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Gateway:
    endpoint: str  # http://127.0.0.1:PORT
    metrics: str  # http://127.0.0.1:PORT/metrics
    proc: subprocess.Popen[str]
    log_path: Path

    def client(self, **config: object):  # type: ignore[no-untyped-def]
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
            config=Config(
                s3={"addressing_style": "path"},
                # boto3 presigns with SigV2 against a custom endpoint unless told; the
                # gateway speaks SigV4 only, as S3 itself does for new regions.
                signature_version="s3v4",
                retries={"max_attempts": 2},
                **config,
            ),  # type: ignore[arg-type]
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def gateway_command(*args: str) -> list[str]:
    """The gateway's command line: ``cloudfs gateway s3`` of this checkout."""
    return [sys.executable, "-m", "cloudfs.cli.main", "gateway", "s3", *args]


def gateway_env(tree: TreeServer, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(tree.env or os.environ)
    env.update(
        CLOUDFS_META_SERVER=tree.address,
        CLOUDFS_GATEWAY_ACCESS_KEY=ACCESS_KEY,
        CLOUDFS_GATEWAY_SECRET_KEY=SECRET_KEY,
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
    )
    env.update(extra or {})
    return env


@pytest.fixture(scope="session")
def tree(s3_server: S3Server) -> Iterator[TreeServer]:
    with running_tree_server(env=s3_server.env()) as server:
        yield server


@pytest.fixture(scope="session")
def gateway(tree: TreeServer) -> Iterator[Gateway]:
    work = Path(tempfile.mkdtemp(prefix="cloudfs-gateway-test-"))
    log_path = work / "gateway.log"
    metrics_port = free_port()
    cmd = gateway_command(
        "--listen",
        "127.0.0.1:0",
        "--staging-dir",
        str(work / "staging"),
        "--metrics",
        f"127.0.0.1:{metrics_port}",
        "--block-size",
        "1M",
    )
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=gateway_env(tree), cwd=REPO
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"gateway did not start: {line!r}\n{log_path.read_text()}")
    gw = Gateway(
        f"http://{line.split()[-1]}", f"http://127.0.0.1:{metrics_port}/metrics", proc, log_path
    )
    try:
        yield gw
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class Volume:
    name: str
    uri: str  # grpc://HOST:PORT/NAME, as a mount names it
    local_dir: Path | None = None


@pytest.fixture
def volume(tree: TreeServer) -> Iterator[Volume]:
    """A fresh volume over a local directory: a fresh bucket of the gateway."""
    data = world_traversable_tmpdir("cloudfs-gateway-")
    uri = tree.new_volume(f"file://{data}")
    yield Volume(uri.rsplit("/", 1)[1], uri, data)
    shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def s3_volume(tree: TreeServer, s3_server: S3Server, s3_bucket: str) -> Volume:
    """A fresh volume over a bucket of the test S3 server."""
    uri = tree.new_volume(f"s3://{s3_bucket}/data")
    return Volume(uri.rsplit("/", 1)[1], uri)


@pytest.fixture
def s3(gateway: Gateway):  # type: ignore[no-untyped-def]
    return gateway.client()


@pytest.fixture(autouse=True)
def no_internal_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test also checks that the gateway logged no traceback (an InternalError)."""
    if "gateway" not in request.fixturenames:
        yield
        return
    gw: Gateway = request.getfixturevalue("gateway")
    start = gw.log_path.stat().st_size
    yield
    with open(gw.log_path, errors="replace") as f:
        f.seek(start)
        logged = f.read()
    assert "Traceback" not in logged, logged
