"""``cloudfs refresh -r`` in the mount: the listed directories under one, listed again."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from cloudfs.control.refresh_ops import RefreshControl
from cloudfs.errors import InvalidArgument, RemoteIOError
from cloudfs.lib.jsonlines import Message
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.meta.interface import Invalidation
from cloudfs.types import ROOT_INODE, InodeId, ListPage
from testkit.memory_store import MemoryObjectStore

ROOT = InodeId(ROOT_INODE)
OBJECTS = {
    "top.txt": b"top",
    "d1/a.txt": b"a",
    "d1/d2/f.bin": b"old bytes",
    "d1/never/x.txt": b"x",  # never listed: left alone
    "e/b.txt": b"b",
    "other/y.txt": b"y",  # never listed either
}


class RecordingStore(MemoryObjectStore):
    """Records the prefix of each LIST; LISTs of ``broken`` prefixes fail."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[str] = []
        self.broken: set[str] = set()
        self._guard = threading.Lock()

    def list_dir(self, prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        with self._guard:
            self.listed.append(prefix)
        if prefix in self.broken:
            raise RemoteIOError(f"LIST {prefix}: the store is down")
        return super().list_dir(prefix, token, limit)


@pytest.fixture
def world() -> Iterator[tuple[EmbeddedMeta, RecordingStore]]:
    store = RecordingStore()
    for key, data in OBJECTS.items():
        store.put_bytes(key, data)
    meta = EmbeddedMeta(MemoryKV(), store, ttl=300.0, revalidate=True)
    # what a reader listed: the root, d1, d1/d2 and e (not d1/never, not other)
    d1 = meta.lookup(ROOT, b"d1").inode
    meta.readdir(meta.lookup(d1, b"d2").inode, None, 100)
    meta.readdir(meta.lookup(ROOT, b"e").inode, None, 100)
    store.listed.clear()
    yield meta, store
    meta.close()


def refresh(meta: EmbeddedMeta, request: Message) -> tuple[Message, list[Message], list[Any]]:
    events: list[Message] = []
    drops: list[Invalidation] = []

    async def emit(event: Message) -> None:
        events.append(event)

    async def main() -> Message:
        return await RefreshControl(meta, drops.append).refresh(request, emit)

    return trio.run(main), events, drops


def test_lists_again_what_was_listed_and_nothing_else(
    world: tuple[EmbeddedMeta, RecordingStore],
) -> None:
    meta, store = world
    d2 = meta.lookup(meta.lookup(ROOT, b"d1").inode, b"d2").inode
    f = meta.lookup(d2, b"f.bin")
    store.put_bytes("d1/d2/f.bin", b"new bytes, longer")  # behind the mount's back

    result, events, drops = refresh(meta, {"inodes": [ROOT], "recursive": True, "parallel": 2})
    assert result == {"directories": 4, "changes": 1, "failed": 0}
    assert sorted(store.listed) == ["", "d1", "d1/d2", "e"]
    assert sorted(e["path"] for e in events) == ["", "d1", "d1/d2", "e"]
    found = {e["path"]: e["found"] for e in events}
    assert found == {"": 2, "d1": 1, "d1/d2": 0, "e": 0}
    assert all(e["root"] == 0 for e in events)
    assert any(f.inode in drop.inodes for drop in drops)
    assert meta.getattr(f.inode).size == len(b"new bytes, longer")


def test_a_directory_that_cannot_be_listed_is_reported_and_the_rest_goes_on(
    world: tuple[EmbeddedMeta, RecordingStore],
) -> None:
    meta, store = world
    store.broken.add("d1")
    result, events, _ = refresh(meta, {"inodes": [ROOT], "recursive": True})
    assert result == {"directories": 2, "changes": 0, "failed": 1}
    failed = [e for e in events if "failed" in e]
    assert [e["path"] for e in failed] == ["d1"] and "down" in failed[0]["failed"]
    assert "d1/d2" not in store.listed and "e" in store.listed  # its subtree skipped


def test_without_recursive_only_the_directory_named(
    world: tuple[EmbeddedMeta, RecordingStore],
) -> None:
    meta, store = world
    result, events, _ = refresh(meta, {"inodes": [ROOT]})
    assert result == {"directories": 1, "changes": 0} and events == []
    assert store.listed == [""]


def test_bad_parallel_is_refused(world: tuple[EmbeddedMeta, RecordingStore]) -> None:
    meta, _ = world
    with pytest.raises(InvalidArgument):
        refresh(meta, {"inodes": [ROOT], "recursive": True, "parallel": 0})
