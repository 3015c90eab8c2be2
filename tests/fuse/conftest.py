"""Fixtures for tests through a real FUSE mount.

``mnt`` is the root of a fresh CloudFS mount, once over a local directory and
once over a bucket on the test S3 server. With CLOUDFS_TEST_PLAIN=1 it is a
plain local directory instead, which shows that a test's expectations are
POSIX's and not CloudFS's. ``cloudfs_mount`` gives the Mount object itself
(its backing store, remount) for tests of CloudFS's own behaviour.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.support.mounts import Backing, Mount, mounted, world_traversable_tmpdir
from tests.support.servers import S3Server

PLAIN = os.environ.get("CLOUDFS_TEST_PLAIN") == "1"

MountFactory = Callable[..., AbstractContextManager[Mount]]


def _require_fuse() -> None:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("FUSE tests need /dev/fuse and root")


@pytest.fixture(params=["plain"] if PLAIN else ["local", "s3"])
def backing(request: pytest.FixtureRequest) -> Backing:
    if request.param in ("plain", "local"):
        data = world_traversable_tmpdir("cloudfs-ufs-")
        request.addfinalizer(lambda: shutil.rmtree(data, ignore_errors=True))
        return Backing(uri=f"file://{data}", local_dir=data)
    s3: S3Server = request.getfixturevalue("s3_server")
    bucket: str = request.getfixturevalue("s3_bucket")
    return Backing(uri=f"s3://{bucket}", s3=s3, bucket=bucket)


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


@pytest.fixture
def mnt(request: pytest.FixtureRequest, backing: Backing) -> Iterator[Path]:
    if PLAIN:
        assert backing.local_dir is not None
        yield backing.local_dir
        return
    mount: Mount = request.getfixturevalue("cloudfs_mount")
    yield mount.root
