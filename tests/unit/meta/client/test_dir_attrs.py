"""KnownDirAttrs: a create's answer about its directory, kept briefly, dropped on any doubt."""

from __future__ import annotations

import stat

from cloudfs.meta.client.dir_attrs import KnownDirAttrs
from cloudfs.types import Attr, InodeId


def _dir(inode: int, nlink: int = 2) -> Attr:
    return Attr(
        inode=InodeId(inode), mode=stat.S_IFDIR | 0o755, nlink=nlink, uid=0, gid=0, rdev=0,
        size=0, atime_ns=0, mtime_ns=1, ctime_ns=1,
    )  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_remembered_directory_is_answered_until_it_expires() -> None:
    clock = Clock()
    known = KnownDirAttrs(keep_seconds=1.0, clock=clock)
    known.remember(_dir(5), known.generation)
    assert known.get(InodeId(5)) == _dir(5)
    assert known.get(InodeId(6)) is None
    clock.now += 1.5
    assert known.get(InodeId(5)) is None


def test_a_change_elsewhere_or_from_another_mount_drops_it() -> None:
    known = KnownDirAttrs()
    known.remember(_dir(5), known.generation)
    known.remember(_dir(6), known.generation)
    known.forget([InodeId(5)])
    assert known.get(InodeId(5)) is None and known.get(InodeId(6)) == _dir(6)
    known.clear()
    assert known.get(InodeId(6)) is None


def test_an_answer_from_before_a_change_made_meanwhile_is_not_kept() -> None:
    """A create sent, then an unlink made and answered, then the create's answer: it
    shows the directory from before the unlink, so it must not be kept."""
    known = KnownDirAttrs()
    sent_at = known.generation
    known.clear()  # the unlink
    known.remember(_dir(5, nlink=3), sent_at)
    assert known.get(InodeId(5)) is None
    known.remember(_dir(5, nlink=2), known.generation)
    assert known.get(InodeId(5)) == _dir(5, nlink=2)
