"""DirectoryCache: directories only, fresh for ttl, forgotten with what is below them."""

from __future__ import annotations

import stat

from cloudfs.client.names import DirectoryCache
from cloudfs.types import Attr, InodeId


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def attr(inode: int, mode: int = stat.S_IFDIR | 0o755) -> Attr:
    return Attr(
        inode=InodeId(inode), mode=mode, nlink=1, uid=0, gid=0, size=0,
        atime_ns=0, mtime_ns=0, ctime_ns=0,
    )  # fmt: skip


def test_the_deepest_fresh_directory_is_found() -> None:
    clock = Clock()
    cache = DirectoryCache(1.0, clock)
    cache.put((b"a",), attr(2))
    cache.put((b"a", b"b"), attr(3))
    assert cache.deepest((b"a", b"b", b"c")) == (2, attr(3))
    assert cache.deepest((b"a", b"x")) == (1, attr(2))
    assert cache.deepest((b"z",)) == (0, None)
    clock.now += 1.5
    assert cache.deepest((b"a", b"b")) == (0, None)  # expired


def test_files_and_a_zero_ttl_are_never_kept() -> None:
    cache = DirectoryCache(1.0, Clock())
    cache.put((b"f",), attr(2, stat.S_IFREG | 0o644))
    assert cache.deepest((b"f",)) == (0, None)
    off = DirectoryCache(0.0, Clock())
    off.put((b"a",), attr(2))
    assert off.deepest((b"a",)) == (0, None)


def test_forget_drops_the_path_and_all_below_it() -> None:
    cache = DirectoryCache(10.0, Clock())
    for parts, inode in [((b"a",), 2), ((b"a", b"b"), 3), ((b"ab",), 4)]:
        cache.put(parts, attr(inode))
    cache.forget((b"a",))
    assert cache.deepest((b"a", b"b")) == (0, None)
    assert cache.deepest((b"ab",)) == (1, attr(4))  # a sibling sharing a prefix stays
