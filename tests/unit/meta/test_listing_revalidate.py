"""Stale-while-revalidate listings: old listings served at once, refreshed behind the reader."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import pytest

from cloudfs.errors import NotFound, RemoteIOError
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine import relister as relister_module
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.meta.engine.relister import BackgroundRelister
from cloudfs.types import ROOT_INODE, InodeId, ListPage
from testkit.memory_store import MemoryObjectStore
from testkit.meta_world import TTL, FakeClock

T = TypeVar("T")
ROOT = InodeId(ROOT_INODE)
WAIT_S = 10.0  # a bound on waits that end at once when the code is right


class GatedStore(MemoryObjectStore):
    """A memory store whose LIST waits while ``gate`` is closed (an S3 LIST taking minutes)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.listing = threading.Event()  # set while a LIST waits at the gate
        self.list_threads: list[str] = []

    def list_dir(self, prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        self.list_threads.append(threading.current_thread().name)
        self.listing.set()
        self.gate.wait()
        return super().list_dir(prefix, token, limit)


@dataclass
class World:
    meta: EmbeddedMeta
    store: GatedStore
    clock: FakeClock

    @property
    def relister(self) -> BackgroundRelister:
        relister = self.meta.loader.relister
        assert relister is not None
        return relister

    def names(self, ino: InodeId = ROOT) -> list[bytes]:
        return [e.name for e in self.meta.readdir(ino, None, 100)]


@pytest.fixture
def w() -> Iterator[World]:
    store, clock = GatedStore(), FakeClock()
    meta = EmbeddedMeta(MemoryKV(), store, ttl=TTL, clock=clock, revalidate=True)
    world = World(meta, store, clock)
    yield world
    store.gate.set()
    meta.close()


def promptly(call: Callable[[], T]) -> T:
    """``call()``, failing the test (not hanging it) if it does not return at once."""
    result: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WAIT_S)
    assert not thread.is_alive(), "the call waited (for a LIST?)"
    if errors:
        raise errors[0]
    return result[0]


def block_lists(w: World) -> None:
    w.store.listing.clear()
    w.store.gate.clear()


def test_a_stale_listing_is_served_at_once_and_refreshed_behind(w: World) -> None:
    w.store.put_bytes("a", b"old")
    assert w.names() == [b"a"]
    w.store.put_bytes("b", b"new")
    block_lists(w)
    w.clock.advance(TTL + 1)

    assert promptly(w.names) == [b"a"]  # the old listing, while the new one is taken
    assert w.store.listing.wait(WAIT_S), "no background LIST started"
    with pytest.raises(NotFound):
        promptly(lambda: w.meta.lookup(ROOT, b"b"))
    w.store.gate.set()
    assert w.relister.idle(WAIT_S)
    assert w.names() == [b"a", b"b"]
    assert w.meta.lookup(ROOT, b"b").size == 3
    assert w.store.list_threads[-1].startswith("cloudfs-relist")


def test_a_blocked_list_blocks_no_lookup_of_a_listed_directory(w: World) -> None:
    w.store.put_bytes("d/f", b"x")
    d = w.meta.lookup(ROOT, b"d").inode
    assert w.names(d) == [b"f"]
    block_lists(w)
    w.clock.advance(TTL * 3)

    for _ in range(20):  # readers come and go: one background LIST per directory
        assert promptly(lambda: w.meta.lookup(d, b"f")).size == 1
        assert promptly(lambda: w.meta.lookup_if_listed(d, b"f")) is not None
        assert promptly(lambda: w.names(d)) == [b"f"]
    assert w.store.listing.wait(WAIT_S)
    w.store.gate.set()
    assert w.relister.idle(WAIT_S)
    assert len(w.store.list_threads) <= 4  # root and d first, then at most root and d again
    assert w.relister.relisted >= 1


def test_a_directory_never_listed_waits_for_its_listing(w: World) -> None:
    w.store.put_bytes("a", b"x")
    block_lists(w)
    waiter = threading.Thread(target=w.names, daemon=True)
    waiter.start()
    assert w.store.listing.wait(WAIT_S)
    waiter.join(0.05)
    assert waiter.is_alive(), "a first listing must be waited for"
    w.store.gate.set()
    waiter.join(WAIT_S)
    assert not waiter.is_alive()
    assert w.store.list_threads == [waiter.name]


def test_relists_failing_for_several_ttls_make_the_reader_wait(w: World) -> None:
    w.store.put_bytes("a", b"x")
    assert w.names() == [b"a"]
    w.store.failures["list_dir"] = RemoteIOError("injected")
    w.clock.advance(TTL + 1)
    assert promptly(w.names) == [b"a"]  # served; the background re-list fails
    assert w.relister.idle(WAIT_S)
    assert w.relister.failed >= 1

    w.clock.advance(relister_module.FAILING_TTLS * TTL + 1)
    before = len(w.store.list_threads)
    assert w.names() == [b"a"]  # the reader tried itself; the UFS is down: last listing
    assert "MainThread" in w.store.list_threads[before:]

    del w.store.failures["list_dir"]
    w.store.put_bytes("b", b"y")
    w.clock.advance(100)  # past the loader's back-off after a failed foreground listing
    assert w.names() == [b"a", b"b"]  # listed in the foreground: the failures are over
    w.store.put_bytes("c", b"z")
    block_lists(w)
    w.clock.advance(TTL + 1)
    assert promptly(w.names) == [b"a", b"b"]  # stale again, served again
    w.store.gate.set()
    # A refresh-ahead re-list the worker took up before "c" was put (its due time passed
    # when the clock moved 100 s) may end last and leave the listing stale: the next
    # reader is served it and asks again, and that re-list brings "c".
    deadline = time.monotonic() + WAIT_S
    while w.names() != [b"a", b"b", b"c"]:
        assert w.relister.idle(WAIT_S) and time.monotonic() < deadline


def test_recently_read_directories_are_refreshed_as_they_expire(w: World) -> None:
    w.store.put_bytes("a", b"x")
    assert w.names() == [b"a"]
    w.store.put_bytes("b", b"y")
    w.store.listing.clear()
    w.clock.advance(TTL + 1)
    w.relister.wake()
    assert w.store.listing.wait(WAIT_S), "no refresh ahead of the next reader"
    assert w.relister.idle(WAIT_S)
    w.store.listing.clear()
    assert w.names() == [b"a", b"b"]  # fresh: nobody waited, nothing stale served

    w.clock.advance((relister_module.ACTIVE_TTLS + 2) * TTL)  # long unread
    w.relister.wake()
    assert w.relister.idle(WAIT_S)
    calls = w.store.calls["list_dir"]
    w.clock.advance(TTL * 2)
    w.relister.wake()
    assert w.relister.idle(WAIT_S)
    assert w.store.calls["list_dir"] <= calls + 1  # an idle directory is left alone


def test_close_stops_the_background_listings(w: World) -> None:
    w.store.put_bytes("a", b"x")
    assert w.names() == [b"a"]
    w.clock.advance(TTL + 1)
    assert w.names() == [b"a"]
    assert w.relister.idle(WAIT_S)
    assert w.relister.running() > 0
    w.meta.close()
    assert w.relister.running() == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("cloudfs-relist")]
    for _ in w.meta.changes():  # ends at close
        pytest.fail("no change expected")


def test_close_does_not_hang_on_a_list_stuck_in_the_ufs(
    w: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relister_module, "CLOSE_WAIT_S", 0.05)
    w.store.put_bytes("a", b"x")
    assert w.names() == [b"a"]
    w.store.put_bytes("b", b"x")
    block_lists(w)
    w.clock.advance(TTL + 1)
    assert w.names() == [b"a"]
    assert w.store.listing.wait(WAIT_S)
    promptly(w.meta.close)
    merged: list[object] = []
    w.meta.loader._on_change = merged.append  # nothing may be merged after close
    w.store.gate.set()
    assert w.relister.idle(WAIT_S)
    for thread in [t for t in threading.enumerate() if t.name.startswith("cloudfs-relist")]:
        thread.join(WAIT_S)
        assert not thread.is_alive()
    assert merged == []


def test_without_revalidate_a_stale_listing_waits() -> None:
    store, clock = GatedStore(), FakeClock()
    meta = EmbeddedMeta(MemoryKV(), store, ttl=TTL, clock=clock)
    try:
        store.put_bytes("a", b"x")
        assert [e.name for e in meta.readdir(ROOT, None, 10)] == [b"a"]
        store.put_bytes("b", b"x")
        clock.advance(TTL + 1)
        assert [e.name for e in meta.readdir(ROOT, None, 10)] == [b"a", b"b"]
        assert meta.loader.relister is None
    finally:
        meta.close()
