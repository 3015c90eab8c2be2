"""The block cache through real mounts over S3: warm-up, remount, corruption, limits, policy.

A counting proxy between the mount and the S3 server tells which reads reached
the object store (GETs of object bodies, not LIST pages).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from cloudfs.mount.runtime import read_pid
from testkit.faults_proxy import FaultsProxy, running_proxy
from testkit.mounts import Backing, Mount, mounted
from testkit.servers import free_port
from tests.fuse.conftest import MountFactory

MiB = 1024 * 1024
pytestmark = pytest.mark.parametrize("backing", ["s3"], indirect=True)


def body_gets(proxy: FaultsProxy) -> int:
    return sum(1 for m, t in proxy.requests if m == "GET" and "list-type=2" not in t)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def read_uncached(path: Path) -> bytes:
    """Read through FUSE, not from the kernel page cache of an earlier pass."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        chunks = []
        while chunk := os.read(fd, MiB):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


@contextmanager
def proxied(backing: Backing, *options: str) -> Iterator[tuple[Mount, FaultsProxy]]:
    assert backing.s3 is not None
    with (
        running_proxy(backing.s3.endpoint) as proxy,
        mounted(backing, ["--s3-endpoint", proxy.endpoint, "--meta-ttl", "600", *options]) as m,
    ):
        yield m, proxy


def test_warmup_fills_the_cache_and_check_and_evict_report_it(backing: Backing) -> None:
    files = {f"data/d{i % 3}/f{i:03d}": os.urandom(200_000 + i) for i in range(30)}
    files["data/big"] = os.urandom(9 * MiB)
    for key, data in files.items():
        backing.write_object(key, data)
    with proxied(backing, "--block-size", "1M") as (m, proxy):
        check = cli("warmup", "--check", str(m.root / "data"))
        assert check.returncode == 0, check.stderr
        assert "0 B cached (0.0%)" in check.stdout

        warm = cli("warmup", str(m.root / "data"), "-p", "4")
        assert warm.returncode == 0, warm.stderr
        assert "warmed up 31 files" in warm.stdout
        check = cli("warmup", "--check", str(m.root / "data"))
        assert "(100.0%), 31 files completely" in check.stdout, check.stdout

        proxy.reset_counts()
        for key, data in files.items():
            assert read_uncached(m.root / key) == data
        assert body_gets(proxy) == 0, proxy.requests  # every byte came from the cache

        evict = cli("warmup", "--evict", str(m.root / "data" / "d1"))
        assert evict.returncode == 0 and "of 10 files" in evict.stdout, evict
        check = cli("warmup", "--check", str(m.root / "data" / "d1"))
        assert "0 B cached (0.0%)" in check.stdout, check.stdout
        assert read_uncached(m.root / "data/d1/f001") == files["data/d1/f001"]
        assert body_gets(proxy) >= 1


def test_warmup_errors_are_one_line(backing: Backing, mount_factory: MountFactory) -> None:
    with mount_factory() as m:
        for args, code in [
            (["/"], 2),  # not on a CloudFS mount
            ([str(m.root / "missing")], 2),
            ([str(m.root), "--parallel", "0"], 2),
            ([str(m.root), "--file-list", "/nonexistent/list"], 2),
        ]:
            result = cli("warmup", *args)
            assert result.returncode == code, (args, result)
            assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result


def test_warmup_takes_a_file_list(
    backing: Backing, mount_factory: MountFactory, tmp_path: Path
) -> None:
    backing.write_object("a/x", b"x" * 1000)
    backing.write_object("a/y", b"y" * 2000)
    with mount_factory() as m:
        listing = tmp_path / "list"
        listing.write_text(f"{m.root / 'a/x'}\n{m.root / 'a/y'}\n")
        result = cli("warmup", "--file-list", str(listing))
        assert result.returncode == 0 and "warmed up 2 files" in result.stdout, result


def test_cache_survives_remount(backing: Backing) -> None:
    data = os.urandom(6 * MiB + 5)
    backing.write_object("kept.bin", data)
    with proxied(backing, "--block-size", "1M") as (m, proxy):
        assert read_uncached(m.root / "kept.bin") == data
        m.restart()
        proxy.reset_counts()
        assert read_uncached(m.root / "kept.bin") == data
        assert body_gets(proxy) == 0, proxy.requests


def test_corrupted_block_file_is_refetched(backing: Backing) -> None:
    data = os.urandom(4 * MiB)
    backing.write_object("fragile.bin", data)
    with proxied(backing, "--block-size", "1M") as (m, proxy):
        assert read_uncached(m.root / "fragile.bin") == data
        m.stop()  # the memory tier goes; the disk tier is all that is left
        blocks = sorted((m.cache_dir / "blocks").glob("*/*"))
        assert len(blocks) == 4
        for victim in blocks[:2]:
            raw = bytearray(victim.read_bytes())
            raw[100] ^= 0xFF
            victim.write_bytes(bytes(raw))
        m.start()
        proxy.reset_counts()
        assert read_uncached(m.root / "fragile.bin") == data
        assert 1 <= body_gets(proxy) <= 2, proxy.requests  # just the two damaged blocks
        assert "checksum mismatch" in m.log()


def _bytes_in(blocks: Path) -> int:
    """The size of the block files (and blocks being written) under ``blocks``; one
    written meanwhile can be renamed between the listing and its stat."""
    total = 0
    for path in blocks.glob("*/*"):
        with suppress(FileNotFoundError):
            total += path.stat().st_size
    return total


def test_size_limit_holds_with_a_dataset_three_times_the_cache(backing: Backing) -> None:
    files = {f"set/f{i:02d}": os.urandom(MiB) for i in range(24)}
    for key, data in files.items():
        backing.write_object(key, data)
    limit = 8 * MiB + 8 * 1024  # eight 1 MiB blocks and their headers
    with proxied(
        backing, "--block-size", "1M", "--cache-size", str(limit),
        "--memory-cache-size", "2M", "--cache-policy", "lru",
    ) as (m, _proxy):  # fmt: skip
        for _ in range(2):
            for key, data in files.items():
                assert read_uncached(m.root / key) == data
                assert _bytes_in(m.cache_dir / "blocks") <= limit


def test_block_cache_spreads_over_several_directories(backing: Backing, tmp_path: Path) -> None:
    data = os.urandom(16 * MiB)
    backing.write_object("spread.bin", data)
    dirs = [tmp_path / "ssd1", tmp_path / "ssd2"]
    with proxied(backing, "--block-size", "1M", "--block-cache-dirs", ":".join(map(str, dirs))) as (
        m,
        _proxy,
    ):
        assert read_uncached(m.root / "spread.bin") == data
        # Block files are written behind the reader: the read can end before the last ones.
        deadline = time.monotonic() + 10
        while sum(counts := [len(list(d.glob("*/*"))) for d in dirs]) < 16:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert sum(counts) == 16 and min(counts) >= 2, counts
        assert not (m.cache_dir / "blocks").exists()


def scrape(port: int, name: str, tier: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(f'{name}{{tier="{tier}"}}'):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.parametrize("policy", ["lru", "tinylfu"])
def test_epochs_over_twice_the_cache(backing: Backing, policy: str) -> None:
    """Three epochs over 16 MiB with an 8 MiB disk tier: LRU thrashes, TinyLFU keeps half."""
    files = {f"epoch/f{i:02d}": os.urandom(MiB) for i in range(16)}
    for key, data in files.items():
        backing.write_object(key, data)
    port = free_port()
    with proxied(
        backing, "--block-size", "1M", "--cache-size", str(8 * MiB + 8 * 1024),
        "--memory-cache-size", "1M", "--cache-policy", policy,
        "--metrics", f"127.0.0.1:{port}",
    ) as (m, _proxy):  # fmt: skip
        ratios = []
        for _epoch in range(3):
            hits = scrape(port, "cloudfs_blockcache_hits_total", "disk")
            misses = scrape(port, "cloudfs_blockcache_misses_total", "disk")
            for key, data in files.items():
                assert read_uncached(m.root / key) == data
            hits = scrape(port, "cloudfs_blockcache_hits_total", "disk") - hits
            misses = scrape(port, "cloudfs_blockcache_misses_total", "disk") - misses
            ratios.append(hits / (hits + misses))
    print(f"\n{policy}: disk-tier hit ratio per epoch {ratios}")
    assert ratios[0] == 0.0
    if policy == "lru":
        assert ratios[1] == ratios[2] == 0.0
    else:
        assert ratios[1] >= 0.4 and ratios[2] >= 0.4, ratios


def test_memory_stays_within_the_tier_plus_300_mib_over_a_large_dataset(backing: Backing) -> None:
    """Issue 4's budget: 1 GiB streamed through a 16 MiB memory tier and a 64 MiB disk tier."""
    blob = os.urandom(128 * MiB)
    names = [f"large/part{i}" for i in range(4)]
    for i, key in enumerate(names):
        backing.write_object(key, blob[i:] + blob[:i])  # four different objects
    memory_tier = 16 * MiB
    with mounted(
        backing, ["--memory-cache-size", str(memory_tier), "--cache-size", str(64 * MiB)]
    ) as m:
        pid = read_pid(os.path.realpath(m.root))
        assert pid is not None
        for _ in range(2):
            for i, key in enumerate(names):
                assert read_uncached(m.root / key) == blob[i:] + blob[:i]
        peak = proc_status(pid, "VmHWM")
    print(f"\npeak resident memory {peak / MiB:.0f} MiB after reading 1 GiB")
    assert peak <= memory_tier + 300 * MiB


def proc_status(pid: int, field: str) -> int:
    """A ``/proc/PID/status`` field (VmRSS, VmHWM) in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise LookupError(field)
