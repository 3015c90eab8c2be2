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

from testkit.etcd import require_etcd, running_etcd
from testkit.mounts import (
    Backing,
    MntBacking,
    Mount,
    mounted,
    world_traversable_tmpdir,
)
from testkit.servers import S3Server
from testkit.tree_compare import assert_same_tree
from testkit.tree_server import TreeServer, running_tree_server

PLAIN = os.environ.get("CLOUDFS_TEST_PLAIN") == "1"
BACKENDS = ["plain"] if PLAIN else ["local", "s3"]
# The POSIX suite (the shared ``mnt``) also runs on "tree": a local directory whose
# tree is served by two tree servers over a 3-member etcd; the test's mount goes
# through the first, and after each test a second mount, through the second
# server, must show the same tree. That second mount is read-only, so in dataset
# mode: every read-only operation (lookup, stat, readdir, readlink, read) of every
# test's result goes through the kernel's long-lived caches and the pushed
# invalidations. Tests with a mount of their own (``backing``) test the mount's
# own machinery on the first two.
SHARED_BACKENDS = ["plain"] if PLAIN else [*BACKENDS, "tree"]

MountFactory = Callable[..., AbstractContextManager[Mount]]
DATASET_PEER = ["--read-only", "--dataset-mode", "on"]  # the tree backend's second mount

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
            first, second = request.getfixturevalue("tree_cluster")
            uri = first.new_volume(f"file://{data}")
            peer = uri.replace(first.address, second.address, 1)
            return Backing(uri=uri, local_dir=data, peer_uri=peer)
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


@pytest.fixture(scope="session")
def tree_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[TreeServer, TreeServer]]:
    """Two tree servers (``cloudfs meta serve``) sharing a 3-member etcd on loopback."""
    binary = require_etcd()
    with running_etcd(tmp_path_factory.mktemp("etcd3"), members=3, binary=binary) as etcd:
        hosts = ",".join(e.removeprefix("http://") for e in etcd.endpoints)
        engine = f"etcd://{hosts}/fuse-suite"
        with running_tree_server(engine) as first, running_tree_server(engine) as second:
            yield first, second


@pytest.fixture(scope="module", params=SHARED_BACKENDS)
def shared_backing(request: pytest.FixtureRequest) -> Backing:
    return _make_backing(request.param, request)


@pytest.fixture(scope="module")
def shared_mounts(shared_backing: Backing) -> Iterator[tuple[Path, Path | None]]:
    """The module's mount, and a second mount of it through another tree server (if any)."""
    if PLAIN:
        assert shared_backing.local_dir is not None
        yield shared_backing.local_dir, None
        return
    _require_fuse()
    with mounted(shared_backing) as m:
        if shared_backing.peer_uri is None:
            yield m.root, None
            return
        with mounted(shared_backing.peer(), DATASET_PEER) as peer:
            yield m.root, peer.root


@pytest.fixture(scope="module")
def shared_mount_root(shared_mounts: tuple[Path, Path | None]) -> Path:
    return shared_mounts[0]


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
def mnt_kind(shared_backing: Backing) -> str:
    """ "local", "s3", "tree" or "plain": the backend of ``mnt``."""
    if PLAIN:
        return "plain"
    if shared_backing.peer_uri is not None:
        return "tree"
    return "s3" if shared_backing.s3 is not None else "local"


@pytest.fixture
def mnt(shared_mounts: tuple[Path, Path | None]) -> Iterator[Path]:
    """A new empty directory (mode 0755, root's) in the module's mount; afterwards, a
    second mount of the volume (through another tree server) must show what it holds."""
    root, peer = shared_mounts
    name = f"t{next(_subdirs)}"
    path = root / name
    path.mkdir()
    path.chmod(0o755)
    yield path
    if peer is not None and path.exists():
        assert_same_tree(path, peer / name)


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
