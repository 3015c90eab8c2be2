"""Fixtures for tests through a real FUSE mount.

``mnt`` is a fresh, empty directory inside a CloudFS mount: one mount per test
module and backend (a local directory, and a bucket on the test S3 server),
so the POSIX suite runs at the speed of the filesystem, not of mount start-up.
With CLOUDFS_TEST_PLAIN=1 it is a plain local directory instead, which shows
that a test's expectations are POSIX's and not CloudFS's.

``mount_factory`` and ``cloudfs_mount`` give a whole mount of its own (its
backing store, remount) to tests of CloudFS's own behaviour.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.support.mounts import (
    Backing,
    MntBacking,
    Mount,
    mounted,
    world_traversable_tmpdir,
)
from tests.support.servers import S3Server
from tests.support.tree_server import TreeServer, running_tree_server

PLAIN = os.environ.get("CLOUDFS_TEST_PLAIN") == "1"
BACKENDS = ["plain"] if PLAIN else ["local", "s3"]
# The POSIX suite (the shared ``mnt``) also runs on "tree": a local directory whose
# tree is served by a real tree service, mounted as grpc://. Tests with a mount of
# their own (``backing``) test the mount's own machinery on the first two.
SHARED_BACKENDS = ["plain"] if PLAIN else [*BACKENDS, "tree"]

MountFactory = Callable[..., AbstractContextManager[Mount]]

_buckets = itertools.count()
_subdirs = itertools.count()


def _require_fuse() -> None:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("FUSE tests need /dev/fuse and root")


def _make_backing(kind: str, request: pytest.FixtureRequest) -> Backing:
    if kind in ("plain", "local", "tree"):
        data = world_traversable_tmpdir("cloudfs-ufs-")
        request.addfinalizer(lambda: shutil.rmtree(data, ignore_errors=True))
        if kind == "tree":
            server: TreeServer = request.getfixturevalue("tree_server")
            return Backing(uri=server.new_volume(f"file://{data}"), local_dir=data)
        return Backing(uri=f"file://{data}", local_dir=data)
    s3: S3Server = request.getfixturevalue("s3_server")
    bucket = f"fuse-{os.getpid()}-{next(_buckets)}"
    s3.client().create_bucket(Bucket=bucket)
    return Backing(uri=f"s3://{bucket}", s3=s3, bucket=bucket)


@pytest.fixture(scope="session")
def tree_server() -> Iterator[TreeServer]:
    """One tree service (LMDB) for the run; each test's backing is a new volume on it."""
    with running_tree_server() as server:
        yield server


@pytest.fixture(scope="module", params=SHARED_BACKENDS)
def shared_backing(request: pytest.FixtureRequest) -> Backing:
    return _make_backing(request.param, request)


@pytest.fixture(scope="module")
def shared_mount_root(shared_backing: Backing) -> Iterator[Path]:
    if PLAIN:
        assert shared_backing.local_dir is not None
        yield shared_backing.local_dir
        return
    _require_fuse()
    with mounted(shared_backing) as m:
        yield m.root


@pytest.fixture
def mnt_backing(mnt: Path, shared_mount_root: Path, shared_backing: Backing) -> MntBacking:
    """The UFS side of ``mnt``: write objects under it behind the mount's back."""
    return MntBacking(shared_backing, mnt.relative_to(shared_mount_root).as_posix())


@pytest.fixture
def ufs_kind(shared_backing: Backing) -> str:
    """ "local", "s3" or "plain": what backs ``mnt`` (S3 cannot hold every name)."""
    if PLAIN:
        return "plain"
    return "s3" if shared_backing.s3 is not None else "local"


@pytest.fixture
def mnt(shared_mount_root: Path) -> Path:
    """A new empty directory (mode 0755, root's) in the module's mount."""
    path = shared_mount_root / f"t{next(_subdirs)}"
    path.mkdir()
    path.chmod(0o755)
    return path


@pytest.fixture(params=BACKENDS)
def backing(request: pytest.FixtureRequest) -> Backing:
    """A fresh, empty backing store of each kind, for a test's own mount."""
    return _make_backing(request.param, request)


@pytest.fixture
def mount_factory(backing: Backing) -> MountFactory:
    """``with mount_factory("--meta-ttl", "1") as m:`` mounts ``backing`` with options."""
    _require_fuse()

    def factory(*options: str) -> AbstractContextManager[Mount]:
        return mounted(backing, list(options))

    return factory


@pytest.fixture
def cloudfs_mount(mount_factory: MountFactory) -> Iterator[Mount]:
    with mount_factory() as m:
        yield m
