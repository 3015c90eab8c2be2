"""Changes outlive the tree service in write-back: with its only server killed, a write-back
mount keeps creating, writing, renaming and removing files (journaled, fsync-ed), serves
them meanwhile, and replays the journal in order when the server is back; a mount that
dies detached replays it when it mounts again, and a name another mount took meanwhile
is kept, ours landing beside it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cloudfs.mount.runtime import read_pid, wait_for_exit
from testkit.mounts import Backing, force_unmount, mounted
from testkit.tree_server import running_tree_server

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

WRITE_BACK = ["--write-mode", "back", "--meta-ttl", "1"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def stats(root: Path) -> dict[str, float]:
    out = cli("stats", "--json", str(root))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    return {k: doc[k] for k in ("tree_detached_seconds", "tree_journaled_changes")}


def write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def until(check: object, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def test_checkpoints_written_while_the_tree_service_is_down_are_replayed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "ckpt").mkdir(parents=True)
    (data / "ckpt" / "latest.bin").write_bytes(b"old")
    with running_tree_server() as server:
        volume = server.new_volume(f"file://{data}")
        with mounted(Backing(volume, local_dir=data), WRITE_BACK) as m:
            ckpt = m.root / "ckpt"
            assert os.listdir(ckpt) == ["latest.bin"]  # where to resume: a listing
            write(ckpt / "step-1.bin", b"one")
            write(ckpt / "latest.tmp", b"one")
            os.rename(ckpt / "latest.tmp", ckpt / "latest.bin")
            write(ckpt / "latest.tmp", b"two")
            time.sleep(1.2)  # past the kernel's entry and attribute timeouts
            server.kill()
            # The first change waits out the reconnect bound, then is journaled on what
            # the mount knew (the soak met it: a rename in flight when the server died).
            os.rename(ckpt / "latest.tmp", ckpt / "latest.bin")

            bodies = {f"step-{i}.bin": os.urandom(200_000 + i) for i in (2, 3)}
            for name, body in bodies.items():
                latest = os.urandom(300_000)
                write(ckpt / name, body)
                write(ckpt / "latest.tmp", latest)  # the checkpoint pattern, twice
                os.rename(ckpt / "latest.tmp", ckpt / "latest.bin")
            os.unlink(ckpt / "step-1.bin")
            os.mkdir(ckpt / "sub")
            write(ckpt / "sub" / "x.bin", b"x" * 5000)
            inode = os.stat(ckpt / "sub" / "x.bin").st_ino

            assert sorted(os.listdir(ckpt)) == ["latest.bin", "step-2.bin", "step-3.bin", "sub"]
            assert (ckpt / "latest.bin").read_bytes() == latest
            now = stats(m.root)
            assert now["tree_detached_seconds"] > 0 and now["tree_journaled_changes"] >= 11

            server.restart()
            until(lambda: stats(m.root)["tree_journaled_changes"] == 0, "no replay", 60)
            assert "replayed" in m.log()
            # Uploads refused while changes waited go at once, not after their back-off.
            landed = [data / "ckpt" / name for name in bodies] + [data / "ckpt" / "sub" / "x.bin"]
            until(lambda: all(p.exists() for p in landed), "uploads waited after the replay", 8)
            flushed = cli("flush", str(m.root), "-q")
            assert flushed.returncode == 0, flushed.stderr
            assert os.stat(ckpt / "sub" / "x.bin").st_ino == inode
        assert (data / "ckpt" / "latest.bin").read_bytes() == latest
        for name, body in bodies.items():
            assert (data / "ckpt" / name).read_bytes() == body
        assert (data / "ckpt" / "sub" / "x.bin").read_bytes() == b"x" * 5000
        assert not (data / "ckpt" / "step-1.bin").exists()
        assert not (data / "ckpt" / "latest.tmp").exists()
        with mounted(Backing(volume, local_dir=data)) as fresh:  # the tree has it all
            assert sorted(os.listdir(fresh.root / "ckpt")) == [
                "latest.bin", "step-2.bin", "step-3.bin", "sub",
            ]  # fmt: skip
            assert os.stat(fresh.root / "ckpt" / "sub" / "x.bin").st_ino == inode
            assert (fresh.root / "ckpt" / "latest.bin").read_bytes() == latest


def test_a_mount_that_died_detached_replays_when_mounted_again(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "out").mkdir(parents=True)
    with running_tree_server() as server:
        volume = server.new_volume(f"file://{data}")
        backing = Backing(volume, local_dir=data)
        with mounted(backing, WRITE_BACK) as m:
            assert os.listdir(m.root / "out") == []
            write(m.root / "out" / "first.bin", b"1")  # the directory's key, from a create
            server.kill()
            ours = os.urandom(100_000)
            write(m.root / "out" / "model.bin", ours)  # journaled, fsync-ed
            pid = read_pid(os.path.realpath(m.root))
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            assert wait_for_exit(pid, 10)
            force_unmount(m.root)

            server.restart()
            with mounted(backing) as other:  # takes the name meanwhile
                (other.root / "out" / "model.bin").write_bytes(b"theirs")

            m.start()  # replays before it serves
            flushed = cli("flush", str(m.root), "-q")
            assert flushed.returncode == 0, flushed.stderr
            names = sorted(os.listdir(m.root / "out"))
            assert names[:2] == ["first.bin", "model.bin"] and len(names) == 3, names
            assert names[2].startswith("model.bin.detached-"), names
            assert (m.root / "out" / names[2]).read_bytes() == ours
            assert "name was taken meanwhile" in m.log()
        assert (data / "out" / "model.bin").read_bytes() == b"theirs"
        assert (data / "out" / names[2]).read_bytes() == ours
