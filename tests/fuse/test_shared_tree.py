"""Two mounts of one volume of the tree service: one namespace, close-to-open between them.

Both mounts keep attributes for 60 s (--meta-ttl), so what one sees of the
other's changes right away comes from the server's change stream.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.mounts import Backing, Mount, mounted, world_traversable_tmpdir
from testkit.tree_server import TreeServer

SLOW_TTL = ["--meta-ttl", "60"]


@pytest.fixture
def two_mounts(tree_server: TreeServer) -> Iterator[tuple[Mount, Mount]]:
    data = world_traversable_tmpdir("cloudfs-ufs-")
    backing = Backing(uri=tree_server.new_volume(f"file://{data}"), local_dir=data)
    try:
        with mounted(backing, SLOW_TTL) as a, mounted(backing, SLOW_TTL) as b:
            yield a, b
    finally:
        shutil.rmtree(data, ignore_errors=True)


def eventually(check: object, timeout: float = 5.0) -> None:
    """Invalidations travel asynchronously: allow them a moment (never a TTL's worth)."""
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("the other mount did not see the change")
        time.sleep(0.05)


def test_close_to_open_between_two_mounts(two_mounts: tuple[Mount, Mount]) -> None:
    a, b = two_mounts
    (a.root / "shared.txt").write_bytes(b"version one")
    eventually(lambda: (b.root / "shared.txt").exists())
    assert (b.root / "shared.txt").read_bytes() == b"version one"
    assert os.stat(b.root / "shared.txt").st_size == 11  # B's kernel caches this for 60 s
    (a.root / "shared.txt").write_bytes(b"version two, which is longer")
    eventually(lambda: os.stat(b.root / "shared.txt").st_size == 28)
    assert (b.root / "shared.txt").read_bytes() == b"version two, which is longer"


def test_names_made_and_removed_in_one_mount_show_in_the_other(
    two_mounts: tuple[Mount, Mount],
) -> None:
    a, b = two_mounts
    (a.root / "dir").mkdir()
    (a.root / "dir" / "f").write_bytes(b"x")
    eventually(lambda: (b.root / "dir" / "f").exists())
    os.rename(a.root / "dir" / "f", a.root / "dir" / "g")
    eventually(lambda: not (b.root / "dir" / "f").exists() and (b.root / "dir" / "g").exists())
    os.chmod(a.root / "dir" / "g", 0o600)
    eventually(lambda: os.stat(b.root / "dir" / "g").st_mode & 0o777 == 0o600)
    os.unlink(a.root / "dir" / "g")
    eventually(lambda: not (b.root / "dir" / "g").exists())
    assert os.listdir(b.root / "dir") == []


def test_one_namespace_for_tree_only_attributes(two_mounts: tuple[Mount, Mount]) -> None:
    a, b = two_mounts
    (a.root / "target").write_bytes(b"t")
    os.symlink("target", a.root / "link")
    os.setxattr(a.root / "target", "user.note", b"shared")
    eventually(lambda: (b.root / "link").is_symlink())
    assert os.readlink(b.root / "link") == "target"
    assert os.getxattr(b.root / "target", "user.note") == b"shared"
    assert Path(b.root / "link").read_bytes() == b"t"


def test_a_pending_write_back_files_size_is_visible_to_the_other_mount(
    tree_server: TreeServer,
) -> None:
    data = world_traversable_tmpdir("cloudfs-ufs-")
    backing = Backing(uri=tree_server.new_volume(f"file://{data}"), local_dir=data)
    writer_options = [*SLOW_TTL, "--write-mode", "back", "--upload-delay", "600"]
    try:
        with mounted(backing, writer_options) as a, mounted(backing, SLOW_TTL) as b:
            (a.root / "ckpt.bin").write_bytes(b"x" * 5000)
            assert not (data / "ckpt.bin").exists()  # not uploaded yet
            eventually(lambda: (b.root / "ckpt.bin").exists())
            assert os.stat(b.root / "ckpt.bin").st_size == 5000
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _lookups(mount: Mount) -> int:
    result = subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "stats", str(mount.root), "--json"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return int(json.loads(result.stdout)["fuse"]["ops"].get("lookup", 0))


def test_a_missing_name_is_cached_until_the_other_mount_creates_it(
    two_mounts: tuple[Mount, Mount],
) -> None:
    a, b = two_mounts
    assert not (b.root / "later.txt").exists()
    before = _lookups(b)
    assert before > 0  # that first lookup reached the mount
    for _ in range(20):
        assert not (b.root / "later.txt").exists()
    assert _lookups(b) == before, "the kernel answered from its negative entry"
    (a.root / "later.txt").write_bytes(b"here")  # the server pushes the new name to B
    eventually(lambda: (b.root / "later.txt").exists())
    assert (b.root / "later.txt").read_bytes() == b"here"
