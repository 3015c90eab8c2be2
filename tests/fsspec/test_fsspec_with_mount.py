"""``cloudfs://`` and a FUSE mount of the same volume see each other's files: one tree,
one object store, and the tree service tells the mount what the fsspec client commits."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import pytest

from cloudfs.fsspec import CloudFileSystem
from testkit.mounts import Backing, Mount, mounted
from tests.fsspec.conftest import Volume

pytestmark = pytest.mark.slow


@pytest.fixture
def mount(volume: Volume) -> Iterator[Mount]:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("FUSE tests need /dev/fuse and root")
    with mounted(Backing(uri=volume.uri, local_dir=volume.local_dir)) as m:
        yield m


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the other side did not see the change")
        time.sleep(0.05)


def test_written_through_fsspec_read_through_the_mount(
    cfs: CloudFileSystem, volume: Volume, mount: Mount
) -> None:
    assert not (mount.root / "from-fsspec").exists()
    data = os.urandom(9 * 1024 * 1024 + 5)
    cfs.pipe_file(f"{volume.name}/from-fsspec/big.bin", data)
    eventually(lambda: (mount.root / "from-fsspec" / "big.bin").exists())
    assert (mount.root / "from-fsspec" / "big.bin").read_bytes() == data
    cfs.pipe_file(f"{volume.name}/from-fsspec/big.bin", b"rewritten")  # close-to-open
    eventually(lambda: (mount.root / "from-fsspec" / "big.bin").stat().st_size == 9)
    assert (mount.root / "from-fsspec" / "big.bin").read_bytes() == b"rewritten"
    cfs.rm(f"{volume.name}/from-fsspec", recursive=True)
    eventually(lambda: not (mount.root / "from-fsspec").exists())


def test_written_through_the_mount_read_through_fsspec(
    cfs: CloudFileSystem, volume: Volume, mount: Mount
) -> None:
    (mount.root / "ckpt").mkdir()
    (mount.root / "ckpt" / "step-1.pt").write_bytes(b"weights" * 1000)
    os.symlink("step-1.pt", mount.root / "ckpt" / "latest")
    assert cfs.cat_file(f"{volume.name}/ckpt/step-1.pt") == b"weights" * 1000
    listing = {e["name"].rsplit("/", 1)[1]: e["type"] for e in cfs.ls(f"{volume.name}/ckpt")}
    assert listing == {"step-1.pt": "file", "latest": "link"}
    os.rename(mount.root / "ckpt" / "step-1.pt", mount.root / "ckpt" / "step-2.pt")
    assert cfs.cat_file(f"{volume.name}/ckpt/step-2.pt") == b"weights" * 1000
    assert not cfs.exists(f"{volume.name}/ckpt/step-1.pt")
