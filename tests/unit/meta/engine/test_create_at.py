"""ReserveInodes and CreateAt: a detached mount's creates land under the numbers it was
given, so the kernel's inode numbers stay right after the replay; nothing else may use
those numbers, and a number twice is refused."""

from __future__ import annotations

import errno
import stat

import pytest

from cloudfs.errors import FsError
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.types import ROOT_INODE, InodeId
from testkit.memory_store import MemoryObjectStore
from testkit.tree_check import check_tree

FILE = stat.S_IFREG | 0o644
DIR = stat.S_IFDIR | 0o755


@pytest.fixture
def meta() -> EmbeddedMeta:
    return EmbeddedMeta(MemoryKV(), MemoryObjectStore(), ttl=3600)


def test_files_and_directories_land_under_the_reserved_numbers(meta: EmbeddedMeta) -> None:
    first = meta.reserve_inodes(8)
    made = meta.create_at(ROOT_INODE, b"d", DIR, 0, 0, InodeId(first + 3))
    assert made.inode == first + 3 and made.is_dir
    inner = meta.create_at(made.inode, b"f", FILE, 0, 0, InodeId(first))
    assert meta.lookup(made.inode, b"f").inode == inner.inode == first
    for n in range(20):  # ordinary creates never take a reserved number
        created = meta.create(ROOT_INODE, f"n{n}".encode(), FILE, 0, 0)
        assert not first <= created.inode < first + 8
    check_tree(meta)


def test_a_number_not_reserved_or_taken_is_refused(meta: EmbeddedMeta) -> None:
    first = meta.reserve_inodes(2)
    with pytest.raises(FsError) as never:
        meta.create_at(ROOT_INODE, b"a", FILE, 0, 0, InodeId(first + 1000))
    assert never.value.errno == errno.EINVAL
    meta.create_at(ROOT_INODE, b"a", FILE, 0, 0, InodeId(first))
    with pytest.raises(FsError) as twice:  # a replay resent: the caller looks the name up
        meta.create_at(ROOT_INODE, b"b", FILE, 0, 0, InodeId(first))
    assert twice.value.errno == errno.EEXIST
    with pytest.raises(FsError) as taken:
        meta.create_at(ROOT_INODE, b"a", FILE, 0, 0, InodeId(first + 1))
    assert taken.value.errno == errno.EEXIST
    with pytest.raises(FsError) as many:
        meta.reserve_inodes(100_000)
    assert many.value.errno == errno.EINVAL
    check_tree(meta)
