"""What a UFS listing changed reaches the mounts: the embedded tree's ``changes()`` and
the tree service's change feeds."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from cloudfs.meta.change_queue import ChangeQueue
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.meta.interface import ChangeSource, Invalidation
from cloudfs.meta.service import changes
from cloudfs.meta.service.changes import Change, ChangeFeed
from cloudfs.meta.service.volumes import Volumes
from cloudfs.meta.wire.volumes import VolumeSpec
from cloudfs.types import ROOT_INODE, InodeId
from testkit.memory_store import MemoryObjectStore
from testkit.meta_world import TTL, FakeClock

ROOT = InodeId(ROOT_INODE)
WAIT_S = 10.0


class Tree:
    """A strict (no background) embedded tree whose listing changes land in ``seen``."""

    def __init__(self) -> None:
        self.store = MemoryObjectStore()
        self.clock = FakeClock()
        self.seen: list[Invalidation] = []
        self.meta = EmbeddedMeta(
            MemoryKV(), self.store, ttl=TTL, clock=self.clock, on_listing_change=self.seen.append
        )

    def relist(self, ino: InodeId = ROOT) -> Invalidation:
        """Let the listing expire, list again; the one change it reported."""
        self.seen.clear()
        self.clock.advance(TTL + 1)
        self.meta.readdir(ino, None, 100)
        assert len(self.seen) == 1, self.seen
        return self.seen[0]


@pytest.fixture
def t() -> Iterator[Tree]:
    tree = Tree()
    yield tree
    tree.meta.close()


def test_a_changed_etag_invalidates_the_file(t: Tree) -> None:
    t.store.put_bytes("a", b"one")
    t.store.put_bytes("b", b"two")
    a = t.meta.lookup(ROOT, b"a").inode
    t.store.put_bytes("a", b"uno")  # same size, new ETag
    assert t.relist() == Invalidation(inodes=(a,))


def test_a_changed_size_invalidates_the_file(t: Tree) -> None:
    t.store.put_bytes("d/f", b"one")
    d = t.meta.lookup(ROOT, b"d").inode
    f = t.meta.lookup(d, b"f").inode
    t.store.put_bytes("d/f", b"longer now")
    assert t.relist(d) == Invalidation(inodes=(f,))


def test_a_removed_name_invalidates_the_entry_and_its_directory(t: Tree) -> None:
    t.store.put_bytes("a", b"x")
    t.store.put_bytes("gone", b"x")
    t.meta.readdir(ROOT, None, 100)
    t.store.delete("gone")
    assert t.relist() == Invalidation(inodes=(ROOT,), entries=((ROOT, b"gone"),))


def test_an_added_name_invalidates_the_entry_and_its_directory(t: Tree) -> None:
    t.store.put_bytes("a", b"x")
    t.meta.readdir(ROOT, None, 100)
    t.store.put_bytes("new", b"x")
    assert t.relist() == Invalidation(inodes=(ROOT,), entries=((ROOT, b"new"),))


def test_a_vanished_directory_invalidates_what_was_in_it(t: Tree) -> None:
    t.store.put_bytes("d/f", b"x")
    t.store.put_bytes("keep", b"x")
    d = t.meta.lookup(ROOT, b"d").inode
    t.meta.readdir(d, None, 100)
    t.store.delete("d/f")
    change = t.relist()
    assert set(change.entries) == {(ROOT, b"d"), (d, b"f")}
    assert change.inodes == (ROOT,)


def test_a_listing_that_changed_nothing_reports_nothing(t: Tree) -> None:
    t.store.put_bytes("a", b"x")
    t.meta.readdir(ROOT, None, 100)
    assert t.seen == [Invalidation(inodes=(ROOT,))]  # a first listing: only the directory
    t.seen.clear()
    t.clock.advance(TTL + 1)
    t.meta.readdir(ROOT, None, 100)
    assert t.store.calls["list_dir"] == 2
    assert t.seen == []


def test_the_embedded_tree_is_a_change_source() -> None:
    store, clock = MemoryObjectStore(), FakeClock()
    meta = EmbeddedMeta(MemoryKV(), store, ttl=TTL, clock=clock, revalidate=True)
    source: ChangeSource = meta
    stream = source.changes()
    store.put_bytes("a", b"x")
    a = meta.lookup(ROOT, b"a").inode
    assert next(stream) == Invalidation(inodes=(ROOT,))  # the first listing: the root's nlink
    store.put_bytes("a", b"changed")
    clock.advance(TTL + 1)
    meta.lookup(ROOT, b"a")  # served stale; listed again in the background
    assert next(stream) == Invalidation(inodes=(a,))
    ended = threading.Event()

    def drain() -> None:
        for _ in stream:
            pass
        ended.set()

    threading.Thread(target=drain, daemon=True).start()
    meta.close()
    assert ended.wait(WAIT_S), "changes() must end when the Meta is closed"


def test_an_overflowing_queue_says_changes_were_lost() -> None:
    queue = ChangeQueue(limit=3)
    for i in range(5):
        queue.put(Invalidation(inodes=(InodeId(i),)))
    stream = queue.changes()
    assert next(stream) == Invalidation(lost=True)
    assert next(stream) == Invalidation(inodes=(InodeId(3),))
    assert next(stream) == Invalidation(inodes=(InodeId(4),))
    queue.close()
    assert list(stream) == []
    assert queue.lost == 1


def test_a_foreground_listing_is_sent_to_the_mount_that_caused_it() -> None:
    feed = ChangeFeed()
    mine, other = feed.subscribe("mine"), feed.subscribe("other")
    change = Invalidation(inodes=(InodeId(5),), entries=((ROOT, b"n"),))
    with changes.origin("mine"):
        changes.listing_changed(feed, change)
    assert mine.changes.get_nowait() == Change(frozenset({5}), frozenset({(ROOT_INODE, b"n")}))
    assert other.changes.empty()  # it heard of the commit itself
    changes.listing_changed(feed, change)  # a background listing: its commit reached all
    assert mine.changes.empty()


def test_the_tree_service_broadcasts_a_background_listing() -> None:
    store, clock = MemoryObjectStore(), FakeClock()
    volumes = Volumes(MemoryKV(), lambda uri: store, clock=clock)
    try:
        volumes.create(VolumeSpec("v", "mem://", meta_ttl=TTL))
        tree, feed = volumes.tree("v"), volumes.feed("v")
        store.put_bytes("a", b"x")
        with changes.origin("m1"):
            tree.readdir(ROOT, None, 100)
        subs = [feed.subscribe("m1"), feed.subscribe("m2")]
        store.put_bytes("b", b"y")
        clock.advance(TTL + 1)
        with changes.origin("m1"):
            tree.readdir(ROOT, None, 100)  # served stale; listed again in the background
        for sub in subs:  # the background listing is nobody's commit: every mount hears it
            change = sub.changes.get(timeout=WAIT_S)
            assert (ROOT_INODE, b"b") in change.entries
    finally:
        volumes.close()
