"""DetachedReads over a tree client that can be switched off: what it answers while
detached, what it forgets, and when it attaches again."""

from __future__ import annotations

import errno
import time
from typing import Any

import pytest

from cloudfs.errors import FsError, NotFound, TreeUnreachable
from cloudfs.meta.client.detached import DetachedReads
from cloudfs.types import Attr, DirEntry, InodeId

ROOT = InodeId(1)


def attr(inode: int, *, is_dir: bool = False) -> Attr:
    mode = 0o040755 if is_dir else 0o100644
    return Attr(InodeId(inode), mode, 1, 0, 0, 3, 0, 0, 0)


class Switchable:
    """A tree of a few names whose server can be taken down and brought back."""

    session = "s"

    def __init__(self) -> None:
        self.up = True
        self.calls = 0
        self.names = {b"a": attr(2), b"d": attr(3, is_dir=True)}

    def _ask(self) -> None:
        self.calls += 1
        if not self.up:
            raise TreeUnreachable("the tree service is unreachable")

    def lookup(self, parent: InodeId, name: bytes) -> Attr:
        self._ask()
        if name not in self.names:
            raise NotFound(name.decode())
        return self.names[name]

    def getattr(self, inode: InodeId) -> Attr:
        self._ask()
        return next(a for a in self.names.values() if a.inode == inode)

    def readdir(self, inode: InodeId, after: bytes | None, limit: int) -> list[DirEntry]:
        self._ask()
        return [DirEntry(name, a) for name, a in sorted(self.names.items())][:limit]

    def open(self, inode: InodeId, *, write: bool = False) -> Attr:
        return self.getattr(inode)

    def release(self, inode: InodeId) -> None:
        self._ask()

    def unlink(self, parent: InodeId, name: bytes) -> Attr:
        self._ask()
        return self.names.pop(name)

    def rename(
        self, parent: InodeId, name: bytes, new_parent: InodeId, new_name: bytes, flags: int = 0
    ) -> None:
        self._ask()
        self.names[new_name] = self.names.pop(name)

    def reachable(self, seconds: float) -> bool:
        return self.up

    def heartbeat(self) -> None:
        self._ask()

    def close(self) -> None:
        pass


def detached_reads(tree: Switchable, **kwargs: Any) -> DetachedReads:
    return DetachedReads(tree, probe_seconds=0.05, **kwargs)  # type: ignore[arg-type]


def test_what_was_read_is_answered_at_once_while_the_service_is_down() -> None:
    tree = Switchable()
    told: list[bool] = []
    meta = detached_reads(tree, on_detached=told.append)
    assert meta.lookup(ROOT, b"a").inode == 2
    with pytest.raises(NotFound):
        meta.lookup(ROOT, b"missing")
    listing = meta.readdir(ROOT, None, 100)
    tree.up = False
    assert meta.getattr(InodeId(2)).inode == 2  # the first call finds it down
    assert meta.detached_since is not None and told == [True]
    calls = tree.calls
    assert meta.lookup(ROOT, b"a").inode == 2
    assert meta.readdir(ROOT, None, 100) == listing
    assert meta.open(InodeId(2)).inode == 2
    meta.release(InodeId(2))
    with pytest.raises(TreeUnreachable):  # a writer is refused at open, not at close
        meta.open(InodeId(2), write=True)
    with pytest.raises(NotFound):  # a name known to be absent stays absent
        meta.lookup(ROOT, b"missing")
    assert tree.calls == calls  # none of them went to the server
    with pytest.raises(TreeUnreachable) as unknown:
        meta.lookup(ROOT, b"never-asked")
    assert unknown.value.errno == errno.EIO
    with pytest.raises(FsError) as change:
        meta.unlink(ROOT, b"a")
    assert change.value.errno == errno.EIO


def test_it_attaches_again_when_the_service_answers() -> None:
    tree = Switchable()
    told: list[bool] = []
    meta = detached_reads(tree, on_detached=told.append)
    meta.getattr(InodeId(2))
    tree.up = False
    meta.getattr(InodeId(2))
    tree.up = True
    deadline = time.monotonic() + 5
    while meta.detached_since is not None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert told == [True, False]
    calls = tree.calls
    meta.getattr(InodeId(2))
    assert tree.calls == calls + 1  # attached: asked again


def test_its_own_changes_drop_or_update_what_they_touch() -> None:
    tree = Switchable()
    meta = detached_reads(tree)
    meta.lookup(ROOT, b"a")
    meta.readdir(ROOT, None, 100)
    meta.unlink(ROOT, b"a")
    tree.up = False
    with pytest.raises(NotFound):
        meta.lookup(ROOT, b"a")  # unlinked by this mount: known gone
    with pytest.raises(TreeUnreachable):
        meta.readdir(ROOT, None, 100)  # the listing changed
    with pytest.raises(TreeUnreachable):
        meta.getattr(InodeId(2))


def test_a_rename_learns_the_names_it_left_and_one_that_found_the_service_gone_drops_nothing() -> (
    None
):
    tree = Switchable()
    meta = detached_reads(tree)
    meta.lookup(ROOT, b"a")
    meta.rename(ROOT, b"a", ROOT, b"b")
    tree.up = False
    with pytest.raises(TreeUnreachable):  # the server died as this rename was sent
        meta.rename(ROOT, b"b", ROOT, b"c")
    assert meta.lookup(ROOT, b"b").inode == 2  # what the mount knew stays: a journal needs it
    with pytest.raises(NotFound):
        meta.lookup(ROOT, b"a")


def test_memory_is_bounded() -> None:
    tree = Switchable()
    meta = detached_reads(tree, max_entries=2)
    meta.lookup(ROOT, b"a")  # remembers the lookup and the attributes
    meta.lookup(ROOT, b"d")
    tree.up = False
    meta.lookup(ROOT, b"d")
    with pytest.raises(TreeUnreachable):
        meta.lookup(ROOT, b"a")  # the least recently used went first
