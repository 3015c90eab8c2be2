"""The gateway and a FUSE mount of the same volume see each other's files (one tree, one
object store), and the gateway's Prometheus endpoint counts what it served."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from botocore.exceptions import ClientError

from testkit.mounts import Backing, Mount, mounted
from tests.gateway.conftest import Gateway, Volume


@pytest.fixture
def mount(volume: Volume) -> Iterator[Mount]:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("FUSE tests need /dev/fuse and root")
    with mounted(Backing(uri=volume.uri, local_dir=volume.local_dir)) as m:
        yield m


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the other side did not see the change")
        time.sleep(0.05)


def test_put_through_gateway_seen_by_mount(s3, volume: Volume, mount: Mount) -> None:  # type: ignore[no-untyped-def]
    data = os.urandom(5 * 1024 * 1024 + 1)
    s3.put_object(Bucket=volume.name, Key="from-s3/blob.bin", Body=data)
    eventually(lambda: (mount.root / "from-s3" / "blob.bin").exists())
    assert (mount.root / "from-s3" / "blob.bin").read_bytes() == data
    s3.put_object(Bucket=volume.name, Key="from-s3/blob.bin", Body=b"new")
    eventually(lambda: (mount.root / "from-s3" / "blob.bin").stat().st_size == 3)
    assert (mount.root / "from-s3" / "blob.bin").read_bytes() == b"new"
    s3.delete_object(Bucket=volume.name, Key="from-s3/blob.bin")
    eventually(lambda: not (mount.root / "from-s3" / "blob.bin").exists())


def test_written_through_mount_served_by_gateway(s3, volume: Volume, mount: Mount) -> None:  # type: ignore[no-untyped-def]
    (mount.root / "ckpt").mkdir()
    (mount.root / "ckpt" / "step-1.pt").write_bytes(b"weights" * 1000)
    (mount.root / "ckpt" / "empty").mkdir()
    got = s3.get_object(Bucket=volume.name, Key="ckpt/step-1.pt")["Body"].read()
    assert got == b"weights" * 1000
    page = s3.list_objects_v2(Bucket=volume.name, Prefix="ckpt/")
    assert [c["Key"] for c in page["Contents"]] == ["ckpt/empty/", "ckpt/step-1.pt"]
    os.rename(mount.root / "ckpt" / "step-1.pt", mount.root / "ckpt" / "step-2.pt")
    assert s3.get_object(Bucket=volume.name, Key="ckpt/step-2.pt")["Body"].read() == got


def test_metrics(s3, gateway: Gateway, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    data = os.urandom(3 * 1024 * 1024)
    s3.put_object(Bucket=volume.name, Key="m.bin", Body=data)
    for _ in range(2):  # the second read is served from the gateway's block cache
        assert s3.get_object(Bucket=volume.name, Key="m.bin")["Body"].read() == data
    text = urllib.request.urlopen(gateway.metrics, timeout=10).read().decode()
    assert 'cloudfs_gateway_requests_total{op="GetObject",status="200"}' in text
    assert 'cloudfs_gateway_bytes_total{direction="out",op="GetObject"}' in text
    assert 'cloudfs_gateway_bytes_total{direction="in",op="PutObject"}' in text
    assert "cloudfs_gateway_request_seconds_bucket" in text
    hits = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith('cloudfs_blockcache_hits_total{tier="memory"}')
    ]
    assert hits and hits[0] > 0


def test_cloudfs_stats_reads_the_gateway(s3, gateway: Gateway, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    s3.put_object(Bucket=volume.name, Key="s", Body=b"12345")
    s3.get_object(Bucket=volume.name, Key="s")["Body"].read()
    with pytest.raises(ClientError):
        s3.get_object(Bucket=volume.name, Key="missing")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cloudfs.cli.main",
            "stats",
            "--json",
            gateway.metrics.removesuffix("/metrics"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "GetObject" in done.stdout and "PutObject" in done.stdout


def _sample(gateway: Gateway, series: str) -> float:
    text = urllib.request.urlopen(gateway.metrics, timeout=10).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(series))


def test_read_ahead_stays_inside_the_requested_range(s3, gateway: Gateway, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    """A ranged GET fetches its own blocks only; a whole GET fetches the rest ahead,
    each block once, mostly two to a GET (the test gateway's blocks are 1 MiB)."""
    mib = 1024 * 1024
    data = os.urandom(24 * mib)
    s3.put_object(Bucket=volume.name, Key="ahead.bin", Body=data)
    gets = 'cloudfs_ufs_requests_total{op="get"}'
    read_in = 'cloudfs_ufs_bytes_total{direction="in"}'
    before, bytes_before = _sample(gateway, gets), _sample(gateway, read_in)
    got = s3.get_object(Bucket=volume.name, Key="ahead.bin", Range="bytes=10-99")["Body"].read()
    assert got == data[10:100]
    time.sleep(0.5)  # anything fetched ahead would have started
    assert _sample(gateway, gets) - before == 1
    assert s3.get_object(Bucket=volume.name, Key="ahead.bin")["Body"].read() == data
    assert _sample(gateway, read_in) - bytes_before == len(data)  # no block twice
    assert _sample(gateway, gets) - before <= 14  # 24 blocks; one GET each would be 24
