"""``cloudfs refresh -r``: a change anywhere under a dataset shows at once, not after the TTL."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testkit.mounts import VOLUME_PROPERTY, Backing, Mount, mounted
from tests.fuse.conftest import MountFactory

OLD = {
    "top.txt": b"top",
    "d1/d2/f.bin": os.urandom(70 * 1024),
    "d1/d2/g.txt": b"short",
    "d1/never/x.txt": b"never looked at",
}
DATASET_MODE = ["--read-only", "--block-size", "64K"]  # --meta-ttl 300 in dataset mode


def _refresh(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "refresh", *map(str, args)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _put(backing: Backing, objects: dict[str, bytes]) -> None:
    for key, data in objects.items():
        backing.write_object(key, data)


def _change_two_down_then_refresh(backing: Backing, m: Mount) -> None:
    r = m.root
    for key in ("top.txt", "d1/d2/f.bin", "d1/d2/g.txt"):  # lists /, d1 and d1/d2
        assert (r / key).read_bytes() == OLD[key]
    new = {
        "d1/d2/f.bin": os.urandom(70 * 1024),  # the same size, other bytes
        "d1/d2/g.txt": b"longer than before",
        "d1/d2/h.txt": b"new",
    }
    time.sleep(0.05)  # a distinct mtime for the local store
    _put(backing, new)
    plain = _refresh(r)  # the directory named only: two levels up stays as it was
    assert plain.returncode == 0, plain.stderr
    assert (r / "d1/d2/f.bin").read_bytes() == OLD["d1/d2/f.bin"]

    result = _refresh("-r", "--no-progress", r)
    assert result.returncode == 0, result.stderr
    # /, d1 and d1/d2; d1/never was never listed, so it is not listed now
    assert result.stdout.startswith("refreshed 3 directories: "), result.stdout
    for key, data in new.items():
        assert (r / key).read_bytes() == data, key
    assert sorted(os.listdir(r / "d1/d2")) == ["f.bin", "g.txt", "h.txt"]

    named_file = _refresh("-r", r / "top.txt")  # a file: its directory, as without -r
    assert named_file.returncode == 0, named_file.stderr
    assert named_file.stdout.startswith("refreshed 1 directory: ")


def test_refresh_r_shows_a_change_two_directories_down(
    backing: Backing, mount_factory: MountFactory
) -> None:
    if backing.is_tree:
        pytest.skip(VOLUME_PROPERTY)
    _put(backing, OLD)
    with mount_factory(*DATASET_MODE) as m:
        _change_two_down_then_refresh(backing, m)


@pytest.mark.slow
def test_refresh_r_through_the_tree_service(tree_server: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "ufs"
    data_dir.mkdir()
    uri = tree_server.new_volume(f"file://{data_dir}", meta_ttl=300.0)
    backing = Backing(uri=uri, local_dir=data_dir)
    _put(backing, OLD)
    with mounted(backing, [*DATASET_MODE, "--meta-ttl", "300"]) as m:
        _change_two_down_then_refresh(backing, m)


def test_refresh_r_errors_are_one_line(tmp_path: Path) -> None:
    off = _refresh("-r", tmp_path)
    assert off.returncode == 2
    assert off.stderr.strip() == f"cloudfs: error: {tmp_path} is not on a CloudFS mount"
    bad = _refresh("-r", "--parallel", "0", tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "cloudfs: error: --parallel must be between 1 and 64"
