"""``cloudfs stats`` against a real mount: moto S3, a background ``cloudfs mount``, a known read.

One mount for the module: the fixture reads one file of three blocks through it
once, and every test reads the mount's numbers (``cloudfs stats`` itself reads
no file data, so the workload's counts stay exact).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cloudfs.control import paths
from cloudfs.mount import runtime
from testkit.mounts import Backing, Mount, mounted
from testkit.servers import S3Server

CLI = [sys.executable, "-m", "cloudfs.cli.main"]
MiB = 1024 * 1024
SIZE = 9 * MiB + 123  # three 4 MiB blocks, the last one short


@dataclass
class Workload:
    mount: Mount
    path: Path
    size: int


@pytest.fixture(scope="module")
def workload(s3_server: S3Server) -> Iterator[Workload]:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("mount tests need /dev/fuse and root")
    bucket = f"stats-{os.getpid()}"
    s3_server.client().create_bucket(Bucket=bucket)  # type: ignore[no-untyped-call]
    backing = Backing(uri=f"s3://{bucket}", s3=s3_server, bucket=bucket)
    data = os.urandom(SIZE)
    backing.write_object("data/train.bin", data)
    with mounted(backing) as mount:
        path = mount.root / "data" / "train.bin"
        assert path.read_bytes() == data
        yield Workload(mount, path, SIZE)


def _stats(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "stats", *argv], capture_output=True, text=True, timeout=timeout)


def _json(workload: Workload) -> dict[str, Any]:
    result = _stats(str(workload.mount.root), "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_json_matches_the_workload(workload: Workload) -> None:
    doc = _json(workload)
    mount = doc["mount"]
    assert mount["mountpoint"] == str(workload.mount.root)
    assert mount["ufs"] == workload.mount.backing.uri
    assert mount["pid"] == runtime.read_pid(str(workload.mount.root))
    assert mount["block_size"] == 4 * MiB

    fuse = doc["fuse"]
    assert fuse["bytes"]["read"] == workload.size
    assert fuse["bytes"]["write"] == 0
    assert fuse["ops"]["read"] >= 1
    assert fuse["ops"]["open"] >= 1
    assert fuse["latency"]["read"]["count"] == fuse["ops"]["read"]
    p50, p99 = fuse["latency"]["read"]["p50_seconds"], fuse["latency"]["read"]["p99_seconds"]
    assert 0 < p50 <= p99
    assert fuse["errors_total"] == 0

    memory, disk = doc["tiers"]["memory"], doc["tiers"]["disk"]
    blocks = -(-workload.size // (4 * MiB))
    assert memory["misses"] > 0
    assert memory["hits"] + memory["misses"] >= blocks  # every block was looked up
    assert memory["hit_ratio"] == pytest.approx(
        memory["hits"] / (memory["hits"] + memory["misses"])
    )
    assert memory["bytes"] == workload.size  # the whole file is in memory, once
    assert memory["blocks"] == blocks
    assert memory["capacity_bytes"] == mount["memory_bytes"]
    assert memory["fill_ratio"] == pytest.approx(workload.size / mount["memory_bytes"])
    assert disk["hits"] == 0  # nothing was ever on this fresh mount's disk
    assert disk["blocks"] <= blocks  # written after the reader has its data: maybe not yet
    assert disk["capacity_bytes"] == mount["disk_bytes"]

    prefetch = doc["prefetch"]
    assert prefetch["used_bytes"] + prefetch["wasted_bytes"] <= prefetch["bytes"]
    assert prefetch["bytes"] <= workload.size


def test_json_ufs_traffic_covers_the_file(workload: Workload) -> None:
    ufs = _json(workload)["ufs"]
    assert ufs["errors_total"] == 0
    assert ufs["bytes_total"] >= workload.size  # a read-only workload: every byte is a read
    assert ufs["requests_total"] >= 1


def test_the_live_view_prints_count_blocks_and_exits_0(workload: Workload) -> None:
    result = _stats(str(workload.path), "--count", "2", "--interval", "0.2")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    blocks = result.stdout.rstrip("\n").split("\n\n")
    assert len(blocks) == 2
    for block in blocks:
        lines = block.splitlines()
        assert lines[0].startswith(f"CloudFS {workload.mount.root} <- s3://")
        assert lines[2].startswith("FUSE      read 0.0 MiB/s")  # nothing read meanwhile
        assert any(line.split()[:1] == ["memory"] for line in lines)
        assert any(line.split()[:1] == ["read"] for line in lines)
        assert "\x1b" not in block


def test_a_path_not_on_a_mount_is_a_usage_error() -> None:
    result = _stats("/tmp", "--json")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == "cloudfs: error: /tmp is not on a CloudFS mount\n"


def test_a_mount_that_does_not_answer_is_one_line_and_status_1(workload: Workload) -> None:
    sock = paths.control_socket(str(workload.mount.root))
    aside = sock.with_name(sock.name + ".aside")
    sock.rename(aside)
    try:
        result = _stats(str(workload.mount.root))
    finally:
        aside.rename(sock)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"cloudfs: {workload.mount.root}: the mount process does not")
    assert _stats(str(workload.mount.root), "--json").returncode == 0  # back again
