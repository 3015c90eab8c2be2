"""A cache group through real processes on loopback: ``cloudfs cache serve`` workers and
real mounts with empty caches (``--cache-peers``), over moto behind a counting proxy.

What the object store sent is counted at the proxy in front of it (response
bytes and requests), not by our own metrics.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from testkit.cache_workers import CacheWorker, running_cache_worker, running_cache_workers
from testkit.faults_proxy import FaultsProxy, running_proxy
from testkit.mounts import Backing, Mount, mounted
from testkit.servers import S3Server, free_port
from tests.fuse.conftest import _require_fuse

pytestmark = pytest.mark.slow

KiB = 1024
BS = 64 * KiB
TOKEN = "group-token"


def _dataset() -> dict[str, bytes]:
    """60 files of two to four blocks (the last one short), the same every run."""
    rng = random.Random(14)
    return {
        f"train/{i // 20}/{i:04d}.bin": rng.randbytes(rng.randint(2 * BS, 4 * BS))
        for i in range(60)
    }


DATASET = _dataset()
DATASET_BYTES = sum(len(d) for d in DATASET.values())
DATASET_BLOCKS = sum(-(-len(d) // BS) for d in DATASET.values())


@dataclass
class Group:
    backing: Backing
    proxy: FaultsProxy

    def body_gets(self) -> int:
        return sum(1 for m, t in self.proxy.requests if m == "GET" and "list-type" not in t)

    def worker_options(self) -> list[str]:
        return ["--s3-endpoint", self.proxy.endpoint, "--cache-size", "256M"]

    def mount_options(self, workers: list[CacheWorker], *more: str) -> list[str]:
        return [
            "--s3-endpoint", self.proxy.endpoint, "--meta-ttl", "600", "--block-size", "64K",
            "--cache-peers", ",".join(w.address for w in workers), *more,
        ]  # fmt: skip


@pytest.fixture
def group(s3_server: S3Server) -> Iterator[Group]:
    _require_fuse()
    bucket = f"group-{os.getpid()}-{random.randrange(1 << 30)}"
    s3_server.client().create_bucket(Bucket=bucket)
    backing = Backing(uri=f"s3://{bucket}", s3=s3_server, bucket=bucket)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda kv: backing.write_object(*kv), DATASET.items()))
    with running_proxy(s3_server.endpoint) as proxy:
        yield Group(backing, proxy)


@contextmanager
def mounts(group: Group, count: int, options: list[str]) -> Iterator[list[tuple[Mount, int]]]:
    """``count`` mounts with empty caches, each with its metrics port."""
    with ExitStack() as stack:
        found = []
        for _ in range(count):
            port = free_port()
            m = stack.enter_context(
                mounted(group.backing, [*options, "--metrics", f"127.0.0.1:{port}"])
            )
            found.append((m, port))
        yield found


def read_all(root: Path, keys: list[str], after: threading.Event | None = None) -> list[str]:
    """Read every key (through the mount); the keys whose bytes were wrong."""
    wrong = []
    for n, key in enumerate(keys):
        if (root / key).read_bytes() != DATASET[key]:
            wrong.append(key)
        if after is not None and n == len(keys) // 3:
            after.set()
    return wrong


def in_parallel(roots: list[Path], kill_after: threading.Event | None = None) -> list[str]:
    """Every mount reads the whole dataset at once, each in its own order."""
    keys = sorted(DATASET)
    orders = [keys[n * 20 :] + keys[: n * 20] for n in range(len(roots))]
    with ThreadPoolExecutor(len(roots)) as pool:
        futures = [
            pool.submit(read_all, root, order, kill_after if n == 0 else None)
            for n, (root, order) in enumerate(zip(roots, orders, strict=True))
        ]
        return [key for f in futures for key in f.result(timeout=240)]


def scrape(port: int, name: str, **labels: str) -> float:
    """The sum of a mount's samples ``name`` whose labels include ``labels``."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                total += sample.value
    return total


def test_three_mounts_take_the_dataset_from_the_store_once(group: Group) -> None:
    with (
        running_cache_workers(3, group.backing.env(), options=group.worker_options()) as workers,
        mounts(group, 3, group.mount_options(workers)) as ms,
    ):
        group.proxy.reset_counts()
        assert in_parallel([m.root for m, _ in ms]) == []
        sent = group.proxy.response_bytes("GET")  # bodies, headers and LIST pages
        assert DATASET_BYTES <= sent <= 1.1 * DATASET_BYTES, (sent, DATASET_BYTES)
        assert group.body_gets() <= 1.1 * DATASET_BLOCKS, (group.body_gets(), DATASET_BLOCKS)
        for _, port in ms:
            assert scrape(port, "cloudfs_ufs_requests_total", op="get") == 0
            assert scrape(port, "cloudfs_peer_requests_total", result="error") == 0
        # Every mount had every block from a peer; a miss there is a block the worker
        # fetched (or waited for while another mount's call fetched it).
        hits = sum(scrape(port, "cloudfs_peer_requests_total", result="hit") for _, port in ms)
        misses = sum(scrape(port, "cloudfs_peer_requests_total", result="miss") for _, port in ms)
        assert hits + misses >= 3 * DATASET_BLOCKS and hits >= DATASET_BLOCKS, (hits, misses)


def test_killing_a_worker_mid_read_fails_no_read(group: Group) -> None:
    with (
        running_cache_workers(3, group.backing.env(), options=group.worker_options()) as workers,
        mounts(group, 3, group.mount_options(workers)) as ms,
    ):
        third_read = threading.Event()
        killer = threading.Thread(target=lambda: third_read.wait(120) and workers[1].kill())
        killer.start()
        try:
            assert in_parallel([m.root for m, _ in ms], kill_after=third_read) == []
        finally:
            third_read.set()  # a read that failed early must not leave the killer waiting
            killer.join(timeout=30)
        assert not workers[1].alive
        dead = workers[1].address
        assert sum(scrape(p, "cloudfs_peer_backoffs_total", member=dead) for _, p in ms) >= 1
        for m, _ in ms:  # and nothing was left half-read: a second pass is whole too
            assert read_all(m.root, sorted(DATASET)) == []


def _refresh(path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "refresh", str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_a_changed_object_is_never_served_stale_from_a_peer(group: Group) -> None:
    key = "train/0/0007.bin"
    old = DATASET[key]
    new = os.urandom(len(old))  # the same size: only the ETag tells the versions apart
    with (
        running_cache_workers(3, group.backing.env(), options=group.worker_options()) as workers,
        mounts(group, 2, group.mount_options(workers)) as ((first, _), (second, port)),
    ):
        assert (first.root / key).read_bytes() == old  # the workers hold the old blocks now
        assert (second.root / "train/0/0008.bin").read_bytes() == DATASET["train/0/0008.bin"]
        group.backing.write_object(key, new)
        group.proxy.reset_counts()
        for m in (first, second):
            _refresh(m.root / key)
            assert (m.root / key).read_bytes() == new
        assert group.body_gets() == -(-len(new) // BS)  # the new version, fetched once
        assert scrape(port, "cloudfs_peer_requests_total", result="error") == 0


def test_a_mount_without_the_token_is_refused_and_reads_the_store(group: Group) -> None:
    keys = sorted(DATASET)[:12]
    with running_cache_worker(
        group.backing.env(), token=TOKEN, options=group.worker_options()
    ) as worker:
        token_file = worker.cache_dir.parent / "mount-token"
        token_file.write_text(TOKEN)
        with mounts(group, 1, group.mount_options([worker])) as [(m, port)]:
            assert read_all(m.root, keys) == []
            assert scrape(port, "cloudfs_peer_requests_total", result="error") >= 1
            assert scrape(port, "cloudfs_peer_backoffs_total") >= 1
            assert scrape(port, "cloudfs_peer_bytes_total") == 0
            assert scrape(port, "cloudfs_ufs_requests_total", op="get") >= len(keys)
            assert "HTTP 401: missing or wrong token" in m.log()  # the token refused
        with_token = group.mount_options([worker], "--cache-token-file", str(token_file))
        with mounts(group, 1, with_token) as [(m, port)]:
            assert read_all(m.root, keys) == []
            assert scrape(port, "cloudfs_peer_requests_total", result="error") == 0
            assert scrape(port, "cloudfs_peer_bytes_total") == sum(len(DATASET[k]) for k in keys)
