"""How the tree mirrors the UFS: TTL refresh, listing cost, merge rules, single listing."""

from __future__ import annotations

import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudfs import errors
from cloudfs.errors import RemoteIOError
from cloudfs.types import ROOT_INODE, AttrChanges, ListPage
from testkit.memory_store import MemoryObjectStore
from testkit.meta_world import TTL, MetaWorld, make_world, mkfile

R = ROOT_INODE


@pytest.fixture(params=["memory-kv", "lmdb-kv"])
def w(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetaWorld]:
    world = make_world(request.param, str(tmp_path))
    yield world
    world.meta.close()


def mem(w: MetaWorld) -> MemoryObjectStore:
    assert isinstance(w.store, MemoryObjectStore)
    return w.store


def test_big_directory_costs_list_pages_not_heads(w: MetaWorld) -> None:
    store = mem(w)
    for i in range(10_000):
        store.put_bytes(f"big/{i:05d}.jpg", b"x" * (i % 7))
    store.reset_calls()
    big = w.meta.lookup(R, b"big").inode
    seen = 0
    after: bytes | None = None
    while page := w.meta.readdir(big, after, 1000):
        assert all(e.attr.size == int(e.name[:5]) % 7 for e in page)
        seen += len(page)
        after = page[-1].name
    assert seen == 10_000
    assert store.calls == {"list_dir": 1 + 10}  # root once, big in 10 pages of 1000
    store.reset_calls()
    assert w.meta.lookup(big, b"04242.jpg").size == 4242 % 7
    assert w.meta.lookup(R, b"big").inode == big
    assert sum(store.calls.values()) == 0  # fresh: KV reads only


def test_ttl_refresh_sees_changes_behind_the_mount(w: MetaWorld) -> None:
    store = mem(w)
    store.put_bytes("keep", b"v1")
    store.put_bytes("gone", b"g")
    keep = w.meta.lookup(R, b"keep")
    w.meta.setattr(keep.inode, AttrChanges(mode=0o600))
    w.meta.setxattr(keep.inode, b"user.k", b"v")
    store.put_bytes("keep", b"version2")
    store.put_bytes("new", b"n")
    store.delete("gone")
    w.clock.advance(TTL / 2)
    assert w.meta.lookup(R, b"keep").etag == keep.etag  # not yet
    assert w.meta.lookup(R, b"gone").size == 1
    with pytest.raises(errors.NotFound):
        w.meta.lookup(R, b"new")
    w.clock.advance(TTL)
    fresh = w.meta.lookup(R, b"keep")
    assert fresh.inode == keep.inode and fresh.size == 8 and fresh.etag == store.head("keep").etag
    assert stat.S_IMODE(fresh.mode) == 0o600 and w.meta.getxattr(keep.inode, b"user.k") == b"v"
    assert w.meta.lookup(R, b"new").size == 1
    with pytest.raises(errors.NotFound):
        w.meta.lookup(R, b"gone")


def test_pending_bytes_are_not_undone_by_a_listing(w: MetaWorld) -> None:
    """A file whose newer bytes wait in the write-back journal keeps them across re-listings."""
    store = mem(w)
    store.put_bytes("old", b"v1")
    store.put_bytes("rewritten", b"v1")
    old = w.meta.lookup(R, b"old")
    pending = w.meta.commit_pending(w.meta.lookup(R, b"rewritten").inode, 12345, 777)
    assert (pending.size, pending.etag, pending.mtime_ns) == (12345, "", 777)
    store.put_bytes("rewritten", b"changed behind the mount")
    store.delete("rewritten")
    store.delete("old")
    w.clock.advance(TTL * 2)
    assert w.meta.lookup(R, b"rewritten").size == 12345  # neither updated nor removed
    with pytest.raises(errors.NotFound):
        w.meta.lookup(R, b"old")
    assert old.inode != pending.inode
    store.put_bytes("rewritten", b"x" * 12345)
    done = w.meta.commit_upload(pending.inode, 12345, 777, store.head("rewritten").etag)
    store.put_bytes("rewritten", b"v3")
    w.clock.advance(TTL * 2)
    fresh = w.meta.lookup(R, b"rewritten")  # uploaded: the listing has its say again
    assert fresh.inode == done.inode and fresh.size == 2


def test_vanished_directory_keeps_only_tree_only_content(w: MetaWorld) -> None:
    store = mem(w)
    store.put_bytes("a/b/c", b"1")
    store.put_bytes("z/only", b"1")
    a = w.meta.lookup(R, b"a").inode
    b = w.meta.lookup(a, b"b").inode
    c = w.meta.lookup(b, b"c").inode
    z = w.meta.lookup(R, b"z").inode
    w.meta.lookup(z, b"only")
    w.meta.symlink(z, b"mine", b"t", 0, 0)
    for key in store.stored_keys():
        store.delete(key)
    w.expire()
    names = {e.name for e in w.meta.readdir(R, None, 10)}
    assert names == {b"z"}  # a went with its subtree; z holds a symlink
    for ino in (a, b, c):
        with pytest.raises(errors.NotFound):
            w.meta.getattr(ino)
    assert {e.name for e in w.meta.readdir(z, None, 10)} == {b"mine"}
    assert w.meta.getattr(R).nlink == 3


def test_open_file_survives_deletion_behind_the_mount(w: MetaWorld) -> None:
    store = mem(w)
    store.put_bytes("f", b"1")
    f = w.meta.lookup(R, b"f").inode
    w.meta.open(f)
    store.delete("f")
    w.expire()
    assert w.meta.lookup(R, b"f").inode == f
    w.meta.release(f)
    w.expire()
    with pytest.raises(errors.NotFound):
        w.meta.lookup(R, b"f")


def test_directory_wins_and_bad_names_are_skipped(w: MetaWorld) -> None:
    store = mem(w)
    store.put_bytes("both", b"file")
    store.put_bytes("both/inner", b"1")
    store.put_bytes("odd//x", b"1")  # an empty path component
    store.put_bytes("..", b"1")
    store.put_bytes("n" * 300, b"1")
    assert w.meta.lookup(R, b"both").is_dir
    assert {e.name for e in w.meta.readdir(R, None, 10)} == {b"both", b"odd"}
    odd = w.meta.lookup(R, b"odd").inode
    assert w.meta.readdir(odd, None, 10) == []


def test_type_change_behind_the_mount(w: MetaWorld) -> None:
    store = mem(w)
    store.put_bytes("x", b"file")
    old = w.meta.lookup(R, b"x").inode
    store.delete("x")
    store.put_bytes("x/y", b"1")
    w.expire()
    now = w.meta.lookup(R, b"x")
    assert now.is_dir and now.inode != old and w.meta.getattr(R).nlink == 3


def test_concurrent_lookups_list_a_directory_once(w: MetaWorld) -> None:
    store = mem(w)
    for i in range(50):
        store.put_bytes(f"d/{i}", b"")
    original = store.list_dir

    def slow_list(prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        time.sleep(0.05)
        return original(prefix, token, limit)

    store.list_dir = slow_list  # type: ignore[method-assign]
    d = w.meta.lookup(R, b"d").inode
    store.reset_calls()
    barrier = threading.Barrier(6)
    found: list[int] = []

    def look() -> None:
        barrier.wait()
        found.append(w.meta.lookup(d, b"7").inode)

    threads = [threading.Thread(target=look) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(found)) == 1 and len(found) == 6
    assert store.calls["list_dir"] == 1


def test_unlink_during_a_listing_is_not_undone(w: MetaWorld) -> None:
    """An unlink in a directory being listed waits for the merge, then wins."""
    store = mem(w)
    store.put_bytes("d/victim", b"1")
    d = w.meta.lookup(R, b"d").inode
    w.meta.lookup(d, b"victim")
    w.expire()
    original = store.list_dir
    listed = threading.Event()
    proceed = threading.Event()

    def paused_list(prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        page = original(prefix, token, limit)
        if prefix == "d" and not listed.is_set():
            listed.set()
            proceed.wait(5)
        return page

    store.list_dir = paused_list  # type: ignore[method-assign]
    reader = threading.Thread(target=lambda: w.meta.readdir(d, None, 10))
    reader.start()
    assert listed.wait(5)
    unlink_done = threading.Thread(target=lambda: w.meta.unlink(d, b"victim"))
    unlink_done.start()
    unlink_done.join(0.2)
    proceed.set()
    reader.join()
    unlink_done.join()
    assert w.meta.readdir(d, None, 10) == []
    assert store.stored_keys() == []


def test_an_upload_committed_during_a_listing_is_not_dropped(w: MetaWorld) -> None:
    """A listing taken before a file's object arrived is not merged over its commit
    (the merge would take the file for one deleted from the UFS)."""
    store = mem(w)
    store.put_bytes("d/old", b"1")
    d = w.meta.lookup(R, b"d").inode
    new = w.meta.create(d, b"new", stat.S_IFREG | 0o644, 0, 0)
    w.expire()
    original = store.list_dir
    listed = threading.Event()
    proceed = threading.Event()

    def paused_list(prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        page = original(prefix, token, limit)
        if prefix == "d" and not listed.is_set():
            listed.set()
            proceed.wait(5)
        return page

    store.list_dir = paused_list  # type: ignore[method-assign]
    reader = threading.Thread(target=lambda: w.meta.readdir(d, None, 10))
    reader.start()
    assert listed.wait(5)  # the listing has "old" only
    w.upload(new.inode, b"payload")  # the object arrives and is committed meanwhile
    proceed.set()
    reader.join()
    assert sorted(e.name for e in w.meta.readdir(d, None, 10)) == [b"new", b"old"]
    assert w.meta.lookup(d, b"new").size == 7


def test_a_pending_file_renamed_over_an_uploaded_one_needs_no_ufs_call(w: MetaWorld) -> None:
    """The checkpoint pattern under write-back (write latest.tmp, rename it over
    latest.bin) works while the UFS is away: the replaced object stays, owned by the
    renamed file, until its upload overwrites it or it is unlinked first."""
    store = mem(w)
    mkfile(w, R, b"latest.bin", b"v1")
    previous = b"v1"
    for round_ in (1, 2):
        tmp = mkfile(w, R, b"latest.tmp", None)
        w.meta.commit_pending(tmp, 5, 777)
        store.failures.update(delete=RemoteIOError("away"), rename=RemoteIOError("away"))
        w.meta.rename(R, b"latest.tmp", R, b"latest.bin", 0)
        store.failures.clear()
        moved = w.meta.lookup(R, b"latest.bin")
        assert (moved.inode, moved.size) == (tmp, 5)
        assert w.ufs_data("latest.bin") == previous  # until the upload
        w.expire()
        assert w.meta.lookup(R, b"latest.bin").size == 5  # the listing has no say
        if round_ == 1:
            previous = b"v2new"
            w.upload(tmp, previous)  # under the new name, over the old object
            assert w.ufs_data("latest.bin") == previous
            assert w.ufs_data("latest.tmp") is None
    w.meta.unlink(R, b"latest.bin")  # before its upload: the object it took over goes
    assert w.ufs_data("latest.bin") is None
    w.expire()
    with pytest.raises(errors.NotFound):
        w.meta.lookup(R, b"latest.bin")
