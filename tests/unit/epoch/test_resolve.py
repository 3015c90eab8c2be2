"""Resolver: a hinted path counts only if the caller could read the file itself.

Over an embedded tree (MemoryKV, memory store): search permission on every
directory on the way, read permission on the file, by uid and groups; root
reads anything; paths are relative to the mount's root.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudfs.epoch import resolve
from cloudfs.epoch.resolve import Caller, Resolver
from cloudfs.errors import FsError
from cloudfs.types import ROOT_INODE, Attr, AttrChanges, InodeId
from testkit.meta_world import MetaWorld, make_world

OWNER, GROUP, OTHER = 1000, 2000, 3000  # uids; GROUP is also the files' gid
ROOT = Caller(0, frozenset({0}))
OWNER_CALLER = Caller(OWNER, frozenset({OWNER}))
GROUP_CALLER = Caller(GROUP, frozenset({4242, GROUP}))  # a supplementary group
OTHER_CALLER = Caller(OTHER, frozenset({OTHER}))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[MetaWorld]:
    w = make_world("memory-kv", str(tmp_path))
    w.meta.setattr(ROOT_INODE, AttrChanges(mode=0o755, uid=0, gid=0))
    yield w
    w.meta.close()


def mkdir(w: MetaWorld, parent: InodeId, name: str, mode: int = 0o755) -> InodeId:
    return w.meta.mkdir(parent, name.encode(), mode, OWNER, GROUP).inode


def mkfile(w: MetaWorld, parent: InodeId, name: str, mode: int, data: bytes = b"x") -> InodeId:
    ino = w.meta.create(parent, name.encode(), stat.S_IFREG | mode, OWNER, GROUP).inode
    w.upload(ino, data)
    return ino


def errno_of(w: MetaWorld, caller: Caller, path: str) -> int:
    """0 when ``caller`` may have ``path`` hinted, else the errno it is refused with."""
    try:
        Resolver(w.meta, caller).file(path)
    except FsError as e:
        return e.errno
    return 0


def attr(mode: int, uid: int = OWNER, gid: int = GROUP) -> Attr:
    return Attr(InodeId(9), mode, 1, uid, gid, 0, 0, 0, 0)


@pytest.mark.parametrize(
    ("mode", "owner", "group", "other"),
    [
        (0o400, True, False, False),
        (0o040, False, True, False),
        (0o004, False, False, True),
        (0o644, True, True, True),
        (0o000, False, False, False),
        (0o044, False, True, True),  # the owner's own bits decide for the owner
        (0o404, True, False, True),  # so do the group's for the group
    ],
)
def test_read_bits_by_owner_group_and_others(
    mode: int, owner: bool, group: bool, other: bool
) -> None:
    file = attr(stat.S_IFREG | mode)
    assert OWNER_CALLER.may(file, 4) is owner
    assert GROUP_CALLER.may(file, 4) is group
    assert OTHER_CALLER.may(file, 4) is other
    assert ROOT.may(file, 4)


def test_search_is_a_bit_of_its_own() -> None:
    assert OTHER_CALLER.may(attr(stat.S_IFDIR | 0o711), 1)
    assert not OTHER_CALLER.may(attr(stat.S_IFDIR | 0o744), 1)
    assert not OTHER_CALLER.may(attr(stat.S_IFREG | 0o003), 4 | 1)  # both bits needed


def test_a_caller_has_its_supplementary_groups() -> None:
    me = Caller.of(os.getpid(), os.getuid(), os.getgid())
    assert me.uid == os.getuid() and set(os.getgroups()) | {os.getgid()} <= me.gids


def test_a_caller_gone_has_its_primary_group_only() -> None:
    assert Caller.of(2**22 + 12345, 77, 88) == Caller(77, frozenset({88}))


def test_a_file_is_resolved_by_path(world: MetaWorld) -> None:
    sub = mkdir(world, mkdir(world, ROOT_INODE, "train"), "a")
    ino = mkfile(world, sub, "0001.jpg", 0o644, b"hello")
    resolver = Resolver(world.meta, OTHER_CALLER)
    for path in ("train/a/0001.jpg", "./train//a/./0001.jpg", "train/a/0001.jpg/"):
        found = resolver.file(path)
        assert found.inode == ino and found.size == 5 and found.etag


@pytest.mark.parametrize(
    ("mode", "allowed"),
    [
        (0o600, {OWNER}),
        (0o640, {OWNER, GROUP}),
        (0o604, {OWNER, OTHER}),
        (0o044, {GROUP, OTHER}),
        (0o000, set()),
    ],
)
def test_the_file_must_be_readable_by_the_caller(
    world: MetaWorld, mode: int, allowed: set[int]
) -> None:
    mkfile(world, mkdir(world, ROOT_INODE, "d"), "f", mode)
    for caller in (OWNER_CALLER, GROUP_CALLER, OTHER_CALLER):
        expected = 0 if caller.uid in allowed else errno.EACCES
        assert errno_of(world, caller, "d/f") == expected, (oct(mode), caller.uid)
    assert errno_of(world, ROOT, "d/f") == 0


@pytest.mark.parametrize(
    ("mode", "allowed"),
    [
        (0o700, {OWNER}),
        (0o710, {OWNER, GROUP}),
        (0o711, {OWNER, GROUP, OTHER}),  # search without read: enough
        (0o755, {OWNER, GROUP, OTHER}),
        (0o644, set()),  # read without search: not enough
        (0o000, set()),
    ],
)
def test_every_directory_on_the_way_must_be_searchable(
    world: MetaWorld, mode: int, allowed: set[int]
) -> None:
    outer = mkdir(world, ROOT_INODE, "outer", mode)
    mkfile(world, mkdir(world, outer, "inner"), "f", 0o644)
    for caller in (OWNER_CALLER, GROUP_CALLER, OTHER_CALLER):
        expected = 0 if caller.uid in allowed else errno.EACCES
        assert errno_of(world, caller, "outer/inner/f") == expected, (oct(mode), caller.uid)
    assert errno_of(world, ROOT, "outer/inner/f") == 0


def test_the_root_directory_must_be_searchable_too(world: MetaWorld) -> None:
    mkfile(world, ROOT_INODE, "f", 0o644)
    world.meta.setattr(ROOT_INODE, AttrChanges(mode=0o750))
    assert errno_of(world, OTHER_CALLER, "f") == errno.EACCES
    assert errno_of(world, ROOT, "f") == 0


@pytest.mark.parametrize("path", ["", "/", ".", "./", "..", "../f", "d/../f", "d/..", "a/../../f"])
def test_paths_that_name_no_file_inside_the_mount_are_refused(world: MetaWorld, path: str) -> None:
    mkfile(world, mkdir(world, ROOT_INODE, "d"), "f", 0o644)
    mkfile(world, ROOT_INODE, "f", 0o644)
    assert errno_of(world, ROOT, path) == errno.EINVAL


def test_a_leading_slash_means_the_mounts_root(world: MetaWorld) -> None:
    """Paths name files inside the mount; "/d/f" is "d/f", never outside it."""
    f = mkfile(world, mkdir(world, ROOT_INODE, "d"), "f", 0o644)
    assert Resolver(world.meta, ROOT).file("/d/f").inode == f


def test_a_directory_is_not_a_file(world: MetaWorld) -> None:
    mkdir(world, mkdir(world, ROOT_INODE, "d"), "e")
    assert errno_of(world, ROOT, "d") == errno.EISDIR
    assert errno_of(world, ROOT, "d/e/") == errno.EISDIR


def test_only_regular_files_are_taken(world: MetaWorld) -> None:
    mkfile(world, ROOT_INODE, "f", 0o644)
    world.meta.symlink(ROOT_INODE, b"link", b"f", OWNER, GROUP)
    world.meta.create(ROOT_INODE, b"fifo", stat.S_IFIFO | 0o644, OWNER, GROUP)
    assert errno_of(world, ROOT, "link") == errno.EINVAL
    assert errno_of(world, ROOT, "fifo") == errno.EINVAL


def test_missing_files_and_directories(world: MetaWorld) -> None:
    mkfile(world, mkdir(world, ROOT_INODE, "d"), "f", 0o644)
    assert errno_of(world, ROOT, "d/nope") == errno.ENOENT
    assert errno_of(world, ROOT, "nope/f") == errno.ENOENT
    assert errno_of(world, OTHER_CALLER, "d/nope") == errno.ENOENT


def test_a_file_on_the_way_is_not_a_directory(world: MetaWorld) -> None:
    mkfile(world, ROOT_INODE, "f", 0o644)
    assert errno_of(world, ROOT, "f/g") == errno.ENOTDIR


def test_the_directories_remembered_are_bounded(
    world: MetaWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolve, "DIRS_REMEMBERED", 4)
    resolver = Resolver(world.meta, OTHER_CALLER)
    for i in range(10):
        mkfile(world, mkdir(world, ROOT_INODE, f"d{i}"), "f", 0o644)
        assert resolver.file(f"d{i}/f").size == 1
    for i in range(10):  # those forgotten are looked up again
        assert resolver.file(f"d{i}/f").size == 1
    assert len(resolver._dirs) <= 4
