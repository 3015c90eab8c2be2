"""A mount given several servers of one tree (``grpc://h1:7070,h2:7070/VOLUME``, stateless
servers over etcd) moves to a live one within seconds when the one it uses is killed:
reads and changes go on, and it never runs detached."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from testkit.etcd import require_etcd, running_etcd
from testkit.mounts import Backing, mounted
from testkit.tree_server import running_tree_server

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

MOVE_SECONDS = 10.0  # to the live server, first call included


def test_a_mount_moves_to_a_live_server_when_its_server_dies(tmp_path: Path) -> None:
    binary = require_etcd()
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_bytes(b"before")
    (tmp_path / "etcd").mkdir()
    with running_etcd(tmp_path / "etcd", binary=binary) as etcd:
        hosts = ",".join(e.removeprefix("http://") for e in etcd.endpoints)
        engine = f"etcd://{hosts}/failover-{uuid.uuid4().hex[:8]}"
        with (
            running_tree_server(engine) as first,
            running_tree_server(engine) as second,
        ):
            volume = first.new_volume(f"file://{data}")
            both = volume.replace(first.address, f"{first.address},{second.address}")
            with mounted(Backing(both, local_dir=data), ["--meta-ttl", "1"]) as m:
                assert (m.root / "a.txt").read_bytes() == b"before"
                (m.root / "b.txt").write_bytes(b"one")
                first.kill()
                time.sleep(1.5)  # past the kernel's caches: the mount must ask
                Path("/proc/sys/vm/drop_caches").write_text("3\n")
                started = time.monotonic()
                (m.root / "c.txt").write_bytes(b"two")  # a change: needs a live server
                assert time.monotonic() - started < MOVE_SECONDS
                assert sorted(os.listdir(m.root)) == ["a.txt", "b.txt", "c.txt"]
                assert (m.root / "b.txt").read_bytes() == b"one"
                assert (data / "c.txt").read_bytes() == b"two"
                assert "running detached" not in m.log()
