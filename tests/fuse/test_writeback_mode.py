"""Write-back through real mounts over S3: close before upload, crashes, outages, flush, drain.

A proxy between the mount and the S3 server counts PUTs and plays the
endpoint going away (``refuse``) or failing a fraction of requests.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cloudfs.mount.runtime import read_pid, wait_for_exit
from testkit.faults_proxy import FaultsProxy, running_proxy
from testkit.mounts import Backing, Mount, force_unmount, mounted

MiB = 1024 * 1024
pytestmark = pytest.mark.parametrize("backing", ["s3"], indirect=True)
WRITE_BACK = ("--write-mode", "back")


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def puts(proxy: FaultsProxy, key: str) -> int:
    return sum(1 for m, t in proxy.requests if m in ("PUT", "POST") and key in t)


def read_uncached(path: Path) -> bytes:
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


def test_close_returns_before_the_upload_and_flush_waits_for_it(backing: Backing) -> None:
    data = os.urandom(3 * MiB + 5)
    with proxied(backing, *WRITE_BACK, "--upload-delay", "600") as (m, proxy):
        (m.root / "ckpt.bin").write_bytes(data)
        assert puts(proxy, "ckpt.bin") == 0 and backing.keys() == set()
        assert os.stat(m.root / "ckpt.bin").st_size == len(data)
        assert read_uncached(m.root / "ckpt.bin") == data  # from the journal
        done = cli("flush", str(m.root), "--quiet")
        assert done.returncode == 0, done.stderr
        assert "everything written is in the object store" in done.stdout
        assert backing.read_object("ckpt.bin") == data
        assert read_uncached(m.root / "ckpt.bin") == data  # now from the object
        assert not os.listdir(m.cache_dir / "writeback" / "data")


def test_a_rewritten_file_is_uploaded_once_and_an_unlinked_one_never(backing: Backing) -> None:
    with proxied(backing, *WRITE_BACK, "--upload-delay", "600") as (m, proxy):
        for version in range(5):
            (m.root / "log.txt").write_bytes(b"version %d\n" % version)
        (m.root / "scratch.tmp").write_bytes(b"temporary")
        os.unlink(m.root / "scratch.tmp")
        (m.root / "draft").write_bytes(b"moved while pending")
        os.rename(m.root / "draft", m.root / "final")
        assert cli("flush", str(m.root), "-q").returncode == 0
        assert puts(proxy, "log.txt") == 1 and puts(proxy, "scratch.tmp") == 0
        assert puts(proxy, "draft") == 0
    assert backing.keys() == {"log.txt", "final"}
    assert backing.read_object("log.txt") == b"version 4\n"
    assert backing.read_object("final") == b"moved while pending"


def test_pending_bytes_outlive_a_relisting_of_their_directory(backing: Backing) -> None:
    backing.write_object("data/x.bin", b"old object")
    with mounted(backing, [*WRITE_BACK, "--upload-delay", "600", "--meta-ttl", "0.5"]) as m:
        assert (m.root / "data/x.bin").read_bytes() == b"old object"
        (m.root / "data/x.bin").write_bytes(b"new bytes, longer than the old")
        time.sleep(1.5)  # past --meta-ttl: the directory is listed again
        assert sorted(os.listdir(m.root / "data")) == ["x.bin"]
        assert (m.root / "data/x.bin").read_bytes() == b"new bytes, longer than the old"
        assert backing.read_object("data/x.bin") == b"old object"
        assert cli("flush", str(m.root), "-q").returncode == 0
        assert backing.read_object("data/x.bin") == b"new bytes, longer than the old"


def test_kill_9_loses_nothing_that_was_closed(backing: Backing) -> None:
    """A stream of writes, kill -9, remount: flush puts every closed file in the UFS."""
    closed: dict[str, bytes] = {}
    stop = threading.Event()
    with mounted(backing, [*WRITE_BACK, "--upload-delay", "3600"]) as m:
        (m.root / "out").mkdir()

        def writer() -> None:
            i = 0
            while not stop.is_set():
                name = f"out/f{i:04d}.bin"
                data = os.urandom(1000 + (i * 7919) % (600 * 1024))
                try:
                    with open(m.root / name, "wb") as f:
                        f.write(data)
                except OSError:
                    return  # the mount died under this file: it was never closed
                closed[name] = data
                i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        time.sleep(3)
        pid = read_pid(os.path.realpath(m.root))
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        stop.set()
        thread.join(timeout=30)
        assert wait_for_exit(pid, 10)
        force_unmount(m.root)
        assert len(closed) >= 5, len(closed)
        assert backing.keys() == set()  # nothing was uploaded before the kill

        m.start()
        flushed = cli("flush", str(m.root), "-q")
        assert flushed.returncode == 0, flushed.stderr
        for name, data in closed.items():
            assert (m.root / name).read_bytes() == data, name
    for name, data in closed.items():
        assert backing.read_object(name) == data, name
    assert set(closed) <= backing.keys()


def test_writes_go_on_while_the_endpoint_is_away(backing: Backing) -> None:
    files = {f"f{i}.bin": os.urandom(50_000 + i) for i in range(10)}
    with proxied(backing, *WRITE_BACK) as (m, proxy):
        os.listdir(m.root)  # a directory never listed cannot be listed during the outage
        proxy.mode = "refuse"
        started = time.monotonic()
        for name, data in files.items():
            (m.root / name).write_bytes(data)
        assert time.monotonic() - started < 10  # closes do not wait for the store
        stuck = cli("flush", str(m.root), "-q", "--timeout", "3")
        assert stuck.returncode == 1 and "still not uploaded" in stuck.stderr
        assert backing.keys() == set()
        proxy.mode = "forward"
        done = cli("flush", str(m.root), "-q", "--timeout", "300", timeout=320)
        assert done.returncode == 0, done.stderr
    assert {k: backing.read_object(k) for k in files} == files


def test_a_checkpoint_renamed_over_the_last_one_while_the_endpoint_is_away(
    backing: Backing,
) -> None:
    """write latest.tmp, rename it over latest.bin: the rename needs no UFS call (the soak
    found it failing with EIO during an outage: the replaced object was deleted first)."""
    backing.write_object("ckpt/latest.bin", b"step 0")
    with proxied(backing, *WRITE_BACK) as (m, proxy):
        assert (m.root / "ckpt/latest.bin").read_bytes() == b"step 0"
        proxy.mode = "refuse"
        for step in (1, 2):
            (m.root / "ckpt/latest.tmp").write_bytes(b"step %d" % step)
            os.rename(m.root / "ckpt/latest.tmp", m.root / "ckpt/latest.bin")
        assert os.listdir(m.root / "ckpt") == ["latest.bin"]
        assert read_uncached(m.root / "ckpt/latest.bin") == b"step 2"
        proxy.mode = "forward"
        done = cli("flush", str(m.root), "-q", "--timeout", "300", timeout=320)
        assert done.returncode == 0, done.stderr
    assert backing.keys() == {"ckpt/latest.bin"}
    assert backing.read_object("ckpt/latest.bin") == b"step 2"


def test_umount_drains_and_no_drain_leaves_the_rest_to_the_next_mount(backing: Backing) -> None:
    with mounted(backing, [*WRITE_BACK, "--upload-delay", "600"]) as m:
        (m.root / "a.txt").write_bytes(b"drained at unmount")
        m.stop()
        assert backing.read_object("a.txt") == b"drained at unmount"

        m.start()
        (m.root / "b.txt").write_bytes(b"left for the next mount")
        result = cli("umount", str(m.root), "--no-drain")
        assert result.returncode == 0, result.stderr
        assert backing.keys() == {"a.txt"}
        m.options = [*WRITE_BACK]  # no delay: the next mount uploads at once
        m.start()
        assert cli("flush", str(m.root), "-q", "--timeout", "60").returncode == 0
        assert backing.read_object("b.txt") == b"left for the next mount"


def test_everything_arrives_once_with_a_fifth_of_the_uploads_failing(backing: Backing) -> None:
    files = {f"set/f{i:02d}.bin": os.urandom(20_000 + 997 * i) for i in range(30)}
    files["set/large.bin"] = os.urandom(9 * MiB)
    with proxied(backing, *WRITE_BACK) as (m, proxy):
        (m.root / "set").mkdir()
        proxy.fail_ratio = 0.2
        proxy.fault_methods = frozenset({"PUT", "POST"})
        for name, data in files.items():
            (m.root / name).write_bytes(data)
        done = cli("flush", str(m.root), "-q", "--timeout", "300", timeout=320)
        assert done.returncode == 0, done.stderr
        assert proxy.injected > 0
        proxy.fail_ratio = 0.0
    assert backing.keys() == set(files)  # every file, under its own name only
    assert {k: backing.read_object(k) for k in files} == files


def test_a_full_staging_area_gives_enospc_and_loses_nothing(backing: Backing) -> None:
    first = {"a.bin": os.urandom(MiB), "b.bin": os.urandom(MiB)}
    with proxied(
        backing, *WRITE_BACK, "--staging-size", "3M", "--staging-wait", "2"
    ) as (m, proxy):  # fmt: skip
        os.listdir(m.root)
        proxy.mode = "refuse"  # nothing leaves the staging area
        for name, data in first.items():
            (m.root / name).write_bytes(data)
        started = time.monotonic()
        with pytest.raises(OSError) as full:
            (m.root / "c.bin").write_bytes(os.urandom(2 * MiB))
        assert full.value.errno == errno.ENOSPC
        assert 2 <= time.monotonic() - started < 30  # it waited for room first
        assert "staging area full" in m.log()
        os.unlink(m.root / "c.bin")
        proxy.mode = "forward"
        assert cli("flush", str(m.root), "-q", "--timeout", "300", timeout=320).returncode == 0
        # Backpressure: with uploads draining, writes past the bound wait and succeed.
        proxy.delay = 0.2
        more = {f"more{i}.bin": os.urandom(MiB) for i in range(6)}
        for name, data in more.items():
            (m.root / name).write_bytes(data)
        assert cli("flush", str(m.root), "-q", "--timeout", "300", timeout=320).returncode == 0
    assert {k: backing.read_object(k) for k in (*first, *more)} == {**first, **more}
    assert backing.keys() == {*first, *more}  # c.bin was unlinked before any upload


def test_write_through_close_returns_only_after_the_object_is_in_the_ufs(
    backing: Backing,
) -> None:
    with proxied(backing, "--write-mode", "through") as (m, proxy):
        proxy.delay = 0.3  # a slow endpoint: close must still wait for it
        data = os.urandom(2 * MiB)
        (m.root / "now.bin").write_bytes(data)
        assert backing.read_object("now.bin") == data  # right after close(), no flush
        assert not os.listdir(m.cache_dir / "writeback" / "data")
        proxy.mode = "refuse"
        with pytest.raises(OSError) as failed:
            (m.root / "later.bin").write_bytes(b"x")
        assert failed.value.errno == errno.EIO  # close reports the failed upload


def test_an_unmount_by_fusermount_drains_too(backing: Backing) -> None:
    with mounted(backing, [*WRITE_BACK, "--upload-delay", "600"]) as m:
        (m.root / "late.txt").write_bytes(b"uploaded on the way out")
        pid = read_pid(os.path.realpath(m.root))
        assert pid is not None
        subprocess.run(["fusermount3", "-u", str(m.root)], check=True, timeout=30)
        assert wait_for_exit(pid, 60)
        assert backing.read_object("late.txt") == b"uploaded on the way out"
