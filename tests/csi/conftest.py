"""Fixtures of the CSI driver tests: a driver process, a kubelet root, a data directory."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.tree_server import TreeServer, running_tree_server
from tests.csi.harness import Driver, Kubelet, force_unmount_all, mounted_under


def require_mounts() -> None:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0 or not shutil.which("fusermount3"):
        pytest.skip("CSI node tests need /dev/fuse, fusermount3 and root (for bind mounts)")


@pytest.fixture
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="cloudfs-csi-"))
    path.chmod(0o755)
    yield path
    force_unmount_all(path)
    if not mounted_under(path):
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def driver(base: Path) -> Iterator[Driver]:
    require_mounts()
    d = Driver(base / "driver")
    d.base.mkdir()
    d.start()
    try:
        yield d
    finally:
        d.stop()
        force_unmount_all(base)  # the FUSE processes exit once their mounts are gone


@pytest.fixture
def kubelet(driver: Driver, base: Path) -> Kubelet:
    root = base / "kubelet"
    root.mkdir()
    return Kubelet(driver, root)


@pytest.fixture
def data(base: Path) -> Path:
    """A local directory holding a small dataset: the UFS of a static volume."""
    path = base / "ufs"
    (path / "train").mkdir(parents=True)
    (path / "train" / "0001.bin").write_bytes(b"sample-1" * 1000)
    (path / "train" / "0002.bin").write_bytes(b"sample-2" * 1000)
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def tree_server() -> Iterator[TreeServer]:
    with running_tree_server(token="csi-test-token-0123456789") as server:
        yield server
