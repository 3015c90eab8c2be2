"""``cloudfs warmup`` (and ``cloudfs stats``) on a mount in a cache group: each block is
held by its owner only, so warming a dataset costs the group one origin read and no
copy on the node that warmed it. Real workers and mounts over moto behind a counting
proxy (the fixtures of test_cache_group.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.cache_workers import running_cache_workers
from tests.fuse import test_cache_group as shared
from tests.fuse.test_cache_group import (
    DATASET,
    DATASET_BLOCKS,
    DATASET_BYTES,
    Group,
    in_parallel,
    mounts,
    scrape,
)

group = shared.group  # the fixture: a bucket with the dataset, behind a counting proxy

pytestmark = pytest.mark.slow


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", *args],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def test_warming_through_the_group_reads_the_store_once_and_copies_nothing_here(
    group: Group,
) -> None:
    with (
        running_cache_workers(3, group.backing.env(), options=group.worker_options()) as workers,
        mounts(group, 2, group.mount_options(workers)) as [(warmer, port), (reader, _)],
    ):
        group.proxy.reset_counts()
        warm = _cli("warmup", "--no-progress", str(warmer.root / "train"))  # --group by default
        assert warm.returncode == 0, warm.stderr
        assert f"warmed up {len(DATASET)} files" in warm.stdout
        assert "by the cache group's owners" in warm.stdout
        sent = group.proxy.response_bytes("GET")
        assert DATASET_BYTES <= sent <= 1.1 * DATASET_BYTES, (sent, DATASET_BYTES)
        assert scrape(port, "cloudfs_peer_bytes_total") == 0  # fills send no bytes back
        check = _cli("warmup", "--check", str(warmer.root / "train"))
        assert check.returncode == 0, check.stderr
        assert "(0.0%)" in check.stdout, check.stdout  # no per-node copy

        group.proxy.reset_counts()  # another node reads it all: every block from a worker
        assert in_parallel([reader.root]) == []
        assert group.body_gets() == 0

        again = _cli("warmup", "--no-progress", "--group", str(warmer.root / "train"))
        assert again.returncode == 0, again.stderr
        assert group.body_gets() == 0  # held already: nothing fetched twice

        stats = _cli("stats", "--json", str(warmer.root))  # the ring as the mount sees it
        assert stats.returncode == 0, stats.stderr
        members = json.loads(stats.stdout)["group"]
        assert sorted(m["member"] for m in members) == sorted(w.address for w in workers)
        assert all(m["up"] and m["in_ring"] and m["errors"] == 0 for m in members)
        assert sum(m["misses"] for m in members) >= DATASET_BLOCKS  # each fetched once
        for w in workers:
            assert scrape(port, "cloudfs_peer_member_up", member=w.address) == 1


def test_warming_locally_in_a_group_keeps_a_copy_here_fetched_once(group: Group) -> None:
    keys = sorted(DATASET)[:10]
    size = sum(len(DATASET[k]) for k in keys)
    with (
        running_cache_workers(2, group.backing.env(), options=group.worker_options()) as workers,
        mounts(group, 1, group.mount_options(workers)) as [(m, _)],
    ):
        paths = [str(m.root / k) for k in keys]
        group.proxy.reset_counts()
        warm = _cli("warmup", "--no-progress", "--local", *paths)
        assert warm.returncode == 0, warm.stderr
        assert size <= group.proxy.response_bytes("GET") <= 1.1 * size
        check = _cli("warmup", "--check", *paths)
        assert "(100.0%)" in check.stdout, check.stdout


def test_group_warm_up_on_a_mount_in_no_group_is_refused(group: Group, tmp_path: Path) -> None:
    options = ["--s3-endpoint", group.proxy.endpoint, "--block-size", "64K"]
    with mounts(group, 1, options) as [(m, _)]:
        warm = _cli("warmup", "--no-progress", "--group", str(m.root / "train/0"))
        assert warm.returncode != 0
        assert "in no cache group" in warm.stderr
        assert "Traceback" not in warm.stderr
        assert group.body_gets() == 0
        both = _cli("warmup", "--check", "--group", str(m.root / "train/0"))
        assert both.returncode == 2 and "Traceback" not in both.stderr, both.stderr
