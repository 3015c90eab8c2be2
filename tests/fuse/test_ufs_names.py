"""Names the UFS cannot hold are refused up front, through real mounts.

An S3 key is at most 1,024 bytes (a directory's marker ``key/`` counts its
slash); a local store's host path at most PATH_MAX - 1 = 4,095 bytes. Each
operation that adds a name (create, mknod, mkdir, symlink, link, rename, and
the rename of a directory, which moves every key below it) must fail with
ENAMETOOLONG and leave nothing: no entry in the tree, no object in the bucket.
A name one byte shorter works.

Paths are reached through directory file descriptors, so the kernel's own
PATH_MAX on a path argument never decides the answer. The backends: a bucket
on the test S3 server with the embedded tree ("s3") and with the tree service
("tree-s3"), and a local directory ("local").
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.mounts import Backing, Mount, mounted, world_traversable_tmpdir
from testkit.servers import S3Server
from testkit.tree_server import running_tree_server
from tests.fuse.conftest import _require_fuse

S3_KEY_MAX = 1024
PATH_MAX = 4096

_buckets = itertools.count()
_dirs = itertools.count()


@dataclass
class World:
    kind: str
    mount: Mount
    backing: Backing
    log_path: Path | None = None  # the tree service's log (tree-s3)

    @property
    def root(self) -> Path:
        return self.mount.root

    def log(self) -> str:
        """Where the tree logs a refusal: the mount's log, or the tree service's."""
        return self.log_path.read_text() if self.log_path else self.mount.log()

    def limit(self, key: str) -> int:
        """Bytes left for ``key`` before the UFS refuses it (negative: over)."""
        if self.backing.local_dir is not None:
            host = os.fsencode(f"{self.backing.local_dir}/{key}")
            return PATH_MAX - 1 - len(host)
        return S3_KEY_MAX - len(key.encode())

    def ufs_paths(self, prefix: str) -> set[str]:
        """Every key (S3, markers included) or path (local) at or below ``prefix``."""
        if self.backing.local_dir is not None:  # from the parent: ``prefix`` may be too long
            parent, _, name = prefix.rpartition("/")
            fd = os.open(self.backing.local_dir / parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                return {f"{parent}/{n}" for n in os.listdir(fd) if n.startswith(name)}
            finally:
                os.close(fd)
        keys: set[str] = set()
        pages = self.backing.client.get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=self.backing.bucket, Prefix=prefix):
            keys.update(o["Key"] for o in page.get("Contents", []))
        return keys


@pytest.fixture(scope="module", params=["s3", "tree-s3", "local"])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    _require_fuse()
    if request.param == "local":
        data = world_traversable_tmpdir("cloudfs-ufs-")
        request.addfinalizer(lambda: shutil.rmtree(data, ignore_errors=True))
        backing = Backing(uri=f"file://{data}", local_dir=data)
        with mounted(backing) as m:
            yield World("local", m, backing)
        return
    s3: S3Server = request.getfixturevalue("s3_server")
    bucket = f"names-{os.getpid()}-{next(_buckets)}"
    s3.client().create_bucket(Bucket=bucket)
    if request.param == "s3":
        backing = Backing(uri=f"s3://{bucket}", s3=s3, bucket=bucket)
        with mounted(backing) as m:
            yield World("s3", m, backing)
        return
    log_dir = world_traversable_tmpdir("cloudfs-tree-log-")
    request.addfinalizer(lambda: shutil.rmtree(log_dir, ignore_errors=True))
    log_path = log_dir / "server.log"
    with running_tree_server(env=s3.env(), log_path=log_path) as server:
        backing = Backing(uri=server.new_volume(f"s3://{bucket}"), s3=s3, bucket=bucket)
        with mounted(backing) as m:
            yield World("tree-s3", m, backing, log_path)


@dataclass
class Deep:
    """A directory near the limit: ``room`` is the longest file name that fits in it."""

    fd: int
    key: str
    room: int


@pytest.fixture
def top(world: World) -> str:
    """A fresh directory's key (its name) at the mount's root."""
    name = f"t{next(_dirs)}"
    os.mkdir(world.root / name)
    return name


def build_deep(world: World, top: str, stack: list[int]) -> Deep:
    """Directories below ``top`` until a file name of 150..255 bytes reaches the limit."""
    fd = os.open(world.root / top, os.O_RDONLY | os.O_DIRECTORY)
    stack.append(fd)
    key = top
    while world.limit(key) - 1 > 255:
        room = world.limit(key) - 1
        name = "d" * min(200, room - 150)
        os.mkdir(name, dir_fd=fd)
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        stack.append(fd)
        key = f"{key}/{name}"
    return Deep(fd, key, world.limit(key) - 1)


@pytest.fixture
def fds() -> Iterator[list[int]]:
    stack: list[int] = []
    yield stack
    for fd in reversed(stack):
        os.close(fd)


def listing(dir_fd: int) -> list[str]:
    """The entries of an open directory, through a fresh open (not a rewind of ``dir_fd``)."""
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY, dir_fd=dir_fd)
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


def assert_refused(err: pytest.ExceptionInfo[OSError]) -> None:
    assert err.value.errno == errno.ENAMETOOLONG, os.strerror(err.value.errno or 0)


def assert_absent(world: World, deep: Deep, name: str) -> None:
    assert name not in listing(deep.fd)
    assert not world.ufs_paths(f"{deep.key}/{name}")


def test_create_over_the_limit(world: World, top: str, fds: list[int]) -> None:
    deep = build_deep(world, top, fds)
    over, fits = "f" * (deep.room + 1), "f" * deep.room
    with pytest.raises(OSError) as err:
        os.open(over, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=deep.fd)
    assert_refused(err)
    assert_absent(world, deep, over)
    logged = [line for line in world.log().splitlines() if f"create '{deep.key[:60]}" in line]
    assert len(logged) == 1 and " INFO " in logged[0] and "refused" in logged[0], logged
    fd = os.open(fits, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=deep.fd)
    os.write(fd, b"fits")
    os.close(fd)
    assert world.ufs_paths(f"{deep.key}/{fits}") == {f"{deep.key}/{fits}"}


def test_mknod_over_the_limit(world: World, top: str, fds: list[int]) -> None:
    deep = build_deep(world, top, fds)
    with pytest.raises(OSError) as err:
        os.mkfifo("p" * (deep.room + 1), dir_fd=deep.fd)
    assert_refused(err)
    assert_absent(world, deep, "p" * (deep.room + 1))
    os.mkfifo("p" * deep.room, dir_fd=deep.fd)


def test_mkdir_over_the_limit(world: World, top: str, fds: list[int]) -> None:
    """A directory's S3 marker is ``key/``: one byte less room than a file."""
    deep = build_deep(world, top, fds)
    room = deep.room - 1 if world.kind != "local" else deep.room
    with pytest.raises(OSError) as err:
        os.mkdir("d" * (room + 1), dir_fd=deep.fd)
    assert_refused(err)
    assert_absent(world, deep, "d" * (room + 1))
    os.mkdir("d" * room, dir_fd=deep.fd)
    assert "d" * room in listing(deep.fd)


def test_symlink_over_the_limit(world: World, top: str, fds: list[int]) -> None:
    deep = build_deep(world, top, fds)
    with pytest.raises(OSError) as err:
        os.symlink("target", "s" * (deep.room + 1), dir_fd=deep.fd)
    assert_refused(err)
    assert_absent(world, deep, "s" * (deep.room + 1))
    os.symlink("target", "s" * deep.room, dir_fd=deep.fd)
    assert os.readlink("s" * deep.room, dir_fd=deep.fd) == "target"


def test_link_over_the_limit(world: World, top: str, fds: list[int]) -> None:
    deep = build_deep(world, top, fds)
    (world.root / top / "f").write_bytes(b"x")
    top_fd = fds[0]
    with pytest.raises(OSError) as err:
        os.link("f", "h" * (deep.room + 1), src_dir_fd=top_fd, dst_dir_fd=deep.fd)
    assert_refused(err)
    assert_absent(world, deep, "h" * (deep.room + 1))
    assert os.stat(world.root / top / "f").st_nlink == 1
    os.link("f", "h" * deep.room, src_dir_fd=top_fd, dst_dir_fd=deep.fd)
    assert os.stat(world.root / top / "f").st_nlink == 2


def test_rename_over_the_limit(world: World, top: str, fds: list[int]) -> None:
    deep = build_deep(world, top, fds)
    (world.root / top / "f").write_bytes(b"x")
    top_fd = fds[0]
    with pytest.raises(OSError) as err:
        os.rename("f", "r" * (deep.room + 1), src_dir_fd=top_fd, dst_dir_fd=deep.fd)
    assert_refused(err)
    assert_absent(world, deep, "r" * (deep.room + 1))
    assert (world.root / top / "f").read_bytes() == b"x"
    assert f"{top}/f" in world.ufs_paths(f"{top}/f")
    os.rename("f", "r" * deep.room, src_dir_fd=top_fd, dst_dir_fd=deep.fd)
    assert world.ufs_paths(f"{deep.key}/{'r' * deep.room}") == {f"{deep.key}/{'r' * deep.room}"}


def test_rename_of_a_directory_whose_subtree_would_overflow(
    world: World, top: str, fds: list[int]
) -> None:
    """Every key below a renamed directory changes: the longest one decides."""
    deep = build_deep(world, top, fds)  # top/d.../d...: a file of ``room`` bytes fits
    os.close(os.open("f" * deep.room, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=deep.fd))
    before = world.ufs_paths(top)
    sub = deep.key.split("/")[1]  # the first directory below top
    top_fd = fds[0]
    with pytest.raises(OSError) as err:
        os.rename(sub, sub + "x", src_dir_fd=top_fd, dst_dir_fd=top_fd)
    assert_refused(err)
    assert listing(top_fd) == [sub]
    assert world.ufs_paths(top) == before
    shorter = sub[:-1]
    os.rename(sub, shorter, src_dir_fd=top_fd, dst_dir_fd=top_fd)  # one byte shorter fits
    assert listing(top_fd) == [shorter]
