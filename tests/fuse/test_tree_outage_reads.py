"""Reads outlive the tree service: with its only server killed, a mount keeps serving the
files and listings it knows (kernel caches dropped, so the mount itself answers), says it
runs detached (``cloudfs stats``), fails changes with EIO in bounded time, and attaches
again when the server is back."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit.mounts import Backing, mounted
from testkit.tree_server import running_tree_server

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

FILES = 20
RECONNECT = 15.0  # the client's wait for a server that refuses connections (channel.py)


def detached_seconds(root: Path) -> float:
    out = subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "stats", "--json", str(root)],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    seconds: float = json.loads(out.stdout)["tree_detached_seconds"]
    return seconds


def drop_kernel_caches() -> None:
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def test_known_files_and_listings_are_served_while_the_tree_service_is_down(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    (data / "train").mkdir(parents=True)
    contents = {f"s{i:02d}.bin": os.urandom(1000 + i) for i in range(FILES)}
    for name, body in contents.items():
        (data / "train" / name).write_bytes(body)
    with running_tree_server() as server:
        volume = server.new_volume(f"file://{data}")
        with mounted(Backing(volume, local_dir=data), ["--meta-ttl", "1"]) as m:
            train = m.root / "train"
            assert sorted(os.listdir(train)) == sorted(contents)
            for name, body in contents.items():
                assert (train / name).read_bytes() == body
            assert detached_seconds(m.root) == 0

            server.kill()
            time.sleep(1.5)  # past the kernel's attribute and entry timeouts
            drop_kernel_caches()
            started = time.monotonic()
            assert (train / "s00.bin").read_bytes() == contents["s00.bin"]
            first = time.monotonic() - started
            assert first < RECONNECT + 5  # the one wait: is the server only restarting?
            started = time.monotonic()
            for name, body in contents.items():
                assert (train / name).read_bytes() == body
            assert sorted(os.listdir(train)) == sorted(contents)
            assert time.monotonic() - started < 5  # the rest at once: the mount knows them
            assert detached_seconds(m.root) > 0
            assert "running detached" in m.log()

            started = time.monotonic()
            with pytest.raises(OSError) as failed:
                (train / "new.bin").write_bytes(b"x")
            assert failed.value.errno == errno.EIO
            assert time.monotonic() - started < RECONNECT + 10

            with pytest.raises(OSError) as refused:  # a writer: refused at open
                open(train / "s01.bin", "r+b")  # noqa: SIM115
            assert refused.value.errno == errno.EIO

            server.restart()
            deadline = time.monotonic() + 20
            while detached_seconds(m.root) > 0:
                assert time.monotonic() < deadline, "the mount did not attach again"
                time.sleep(0.5)
            (train / "new.bin").write_bytes(b"after")
            assert (data / "train" / "new.bin").read_bytes() == b"after"
            assert "tree service back after" in m.log()
