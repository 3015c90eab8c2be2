"""rename(2) variants, with their effects on the UFS checked in the store.

Same worlds as the contract suite (``tests/contract/test_meta.py``): MemoryKV and
LmdbKV over the memory store, and LMDB over ``LocalObjectStore`` when present.
"""

from __future__ import annotations

import pytest

from cloudfs import errors
from cloudfs.meta.interface import RENAME_EXCHANGE, RENAME_NOREPLACE
from cloudfs.types import ROOT_INODE
from testkit.meta_world import MetaWorld, mkfile

R = ROOT_INODE


def test_rename_file_moves_object(w: MetaWorld) -> None:
    d = w.meta.mkdir(R, b"d", 0o755, 0, 0).inode
    f = mkfile(w, R, b"a", b"A")
    w.clock.advance(1)
    w.meta.rename(R, b"a", d, b"b")
    assert w.ufs_data("a") is None and w.ufs_data("d/b") == b"A"
    assert w.meta.lookup(d, b"b").inode == f and w.meta.object_key(f) == "d/b"
    assert w.meta.getattr(f).ctime_ns == w.clock.now
    assert w.meta.getattr(R).mtime_ns == w.meta.getattr(d).mtime_ns == w.clock.now
    with pytest.raises(errors.NotFound):
        w.meta.lookup(R, b"a")
    g = mkfile(w, R, b"pending", None)  # not uploaded: a tree-only move
    w.meta.rename(R, b"pending", d, b"moved")
    assert w.meta.object_key(g) == "d/moved" and w.ufs_data("d/moved") is None


def test_rename_directory_moves_subtree(w: MetaWorld) -> None:
    w.store.put_bytes("src/a/deep.txt", b"deep")
    src = w.meta.lookup(R, b"src").inode
    a = w.meta.lookup(src, b"a").inode
    deep = w.meta.lookup(a, b"deep.txt").inode
    dst = w.meta.mkdir(R, b"dst", 0o755, 0, 0).inode
    w.meta.rename(R, b"src", dst, b"moved")
    assert w.meta.object_key(deep) == "dst/moved/a/deep.txt"
    assert w.ufs_data("dst/moved/a/deep.txt") == b"deep" and w.ufs_data("src/a/deep.txt") is None
    assert w.meta.getattr(R).nlink == 3 and w.meta.getattr(dst).nlink == 3
    w.expire()
    assert w.meta.lookup(w.meta.lookup(dst, b"moved").inode, b"a").inode == a
    with pytest.raises(errors.InvalidArgument):
        w.meta.rename(dst, b"moved", a, b"loop")
    with pytest.raises(errors.InvalidArgument):
        w.meta.rename(R, b"dst", w.meta.lookup(dst, b"moved").inode, b"x")


def test_rename_replacing_targets(w: MetaWorld) -> None:
    mkfile(w, R, b"f1", b"one")
    f2 = mkfile(w, R, b"f2", b"two")
    d1 = w.meta.mkdir(R, b"d1", 0o755, 0, 0).inode
    w.meta.mkdir(R, b"d2", 0o755, 0, 0)
    full = w.meta.mkdir(R, b"full", 0o755, 0, 0).inode
    mkfile(w, full, b"x", None)
    with pytest.raises(errors.IsADirectory):
        w.meta.rename(R, b"f1", R, b"d1")
    with pytest.raises(errors.NotADirectory):
        w.meta.rename(R, b"d1", R, b"f1")
    with pytest.raises(errors.NotEmpty):
        w.meta.rename(R, b"d1", R, b"full")
    with pytest.raises(errors.AlreadyExists):
        w.meta.rename(R, b"f1", R, b"f2", RENAME_NOREPLACE)
    w.meta.rename(R, b"f1", R, b"f2")
    assert w.ufs_data("f2") == b"one" and w.ufs_data("f1") is None
    with pytest.raises(errors.NotFound):
        w.meta.getattr(f2)
    nlink = w.meta.getattr(R).nlink
    w.meta.rename(R, b"d1", R, b"d2")
    assert w.meta.lookup(R, b"d2").inode == d1 and w.meta.getattr(R).nlink == nlink - 1
    assert "d1/" not in w.ufs_names() and "d2/" in w.ufs_names()
    pending = mkfile(w, R, b"pending", None)  # a not-uploaded file replaces an object
    mkfile(w, R, b"victim", b"v")
    w.meta.rename(R, b"pending", R, b"victim")
    assert w.ufs_data("victim") is None and w.meta.lookup(R, b"victim").inode == pending


def test_rename_noops(w: MetaWorld) -> None:
    f = mkfile(w, R, b"f", b"1")
    w.meta.link(f, R, b"g")
    w.meta.rename(R, b"f", R, b"f")
    w.meta.rename(R, b"f", R, b"g")  # two names of one inode: nothing happens
    assert w.meta.lookup(R, b"f").inode == w.meta.lookup(R, b"g").inode == f
    assert w.meta.getattr(f).nlink == 2 and w.ufs_data("f") == b"1"
    with pytest.raises(errors.NotFound):
        w.meta.rename(R, b"missing", R, b"x")
    with pytest.raises(errors.InvalidArgument):
        w.meta.rename(R, b"f", R, b"x", RENAME_NOREPLACE | RENAME_EXCHANGE)


def test_rename_exchange(w: MetaWorld) -> None:
    a = mkfile(w, R, b"a", b"AAA")
    d = w.meta.mkdir(R, b"d", 0o755, 0, 0).inode
    b = mkfile(w, d, b"b", b"BB")
    w.meta.rename(R, b"a", d, b"b", RENAME_EXCHANGE)
    assert w.meta.lookup(R, b"a").inode == b and w.meta.lookup(d, b"b").inode == a
    assert w.ufs_data("a") == b"BB" and w.ufs_data("d/b") == b"AAA"
    assert w.meta.object_key(a) == "d/b" and w.meta.object_key(b) == "a"
    assert w.ufs_names() == {"a", "d/"} and w.ufs_names("d") == {"b"}
    with pytest.raises(errors.NotFound):
        w.meta.rename(R, b"a", R, b"nothing", RENAME_EXCHANGE)
    # a file and a directory trade places; link counts follow
    w.meta.rename(R, b"a", R, b"d", RENAME_EXCHANGE)
    assert w.meta.lookup(R, b"a").inode == d and w.meta.lookup(R, b"d").inode == b
    assert w.meta.object_key(a) == "a/b" and w.ufs_data("a/b") == b"AAA"
    assert w.meta.getattr(R).nlink == 3
    with pytest.raises(errors.InvalidArgument):
        w.meta.rename(d, b"b", R, b"a", RENAME_EXCHANGE)


def test_rename_lists_stale_directories_first(w: MetaWorld) -> None:
    """Names that reached the UFS after the last listing are found once it is due: the
    source, and a directory at the target whose new object makes it non-empty."""
    d = w.meta.mkdir(R, b"d", 0o755, 0, 0).inode
    w.meta.lookup(R, b"d")
    w.store.put_bytes("late.txt", b"L")
    w.store.put_bytes("d/full/x", b"x")
    w.expire()
    w.meta.rename(R, b"late.txt", d, b"moved.txt")
    assert w.ufs_data("d/moved.txt") == b"L"
    e = w.meta.mkdir(R, b"e", 0o755, 0, 0).inode
    w.store.put_bytes("e/sub/y", b"y")  # e/sub appears in the UFS only
    w.expire()
    with pytest.raises(errors.NotEmpty):
        w.meta.rename(d, b"full", e, b"sub")
