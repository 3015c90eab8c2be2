"""walk.py over an in-memory tree: S3's byte order, bounds, and that a page reads about a
page of names (not the whole volume)."""

from __future__ import annotations

import stat
from typing import Any

from cloudfs.errors import NotADirectory, NotFound
from cloudfs.gateway.listing import list_page
from cloudfs.gateway.walk import walk
from cloudfs.types import Attr, DirEntry, InodeId


def _attr(inode: int, is_dir: bool) -> Attr:
    mode = (stat.S_IFDIR | 0o755) if is_dir else (stat.S_IFREG | 0o644)
    return Attr(
        InodeId(inode), mode, 1, 0, 0, 0 if is_dir else 3, 0, 0, 0, etag="" if is_dir else "e"
    )


class FakeMeta:
    def __init__(self) -> None:
        self.children: dict[int, dict[bytes, Attr]] = {1: {}}
        self.calls = 0
        self.next_inode = 2

    def add(self, key: str) -> None:
        inode = 1
        parts = key.encode().split(b"/")
        is_marker = key.endswith("/")
        names = parts[:-1] if is_marker else parts
        for i, name in enumerate(names):
            last = i == len(names) - 1
            entry = self.children[inode].get(name)
            if entry is None:
                is_dir = not last or is_marker
                entry = _attr(self.next_inode, is_dir)
                self.next_inode += 1
                self.children[inode][name] = entry
                if is_dir:
                    self.children[entry.inode] = {}
            inode = entry.inode

    def readdir(self, inode: int, after: bytes | None, limit: int) -> list[DirEntry]:
        self.calls += 1
        names = sorted(n for n in self.children[inode] if after is None or n > after)
        return [DirEntry(n, self.children[inode][n]) for n in names[:limit]]

    def lookup(self, inode: int, name: bytes) -> Attr:
        self.calls += 1
        try:
            return self.children[inode][name]
        except KeyError:
            raise NotFound() from None


class FakeHandle:
    def __init__(self, keys: list[str]) -> None:
        self.meta = FakeMeta()
        for key in keys:
            self.meta.add(key)

    def resolve(self, parts: tuple[bytes, ...]) -> Attr:
        attr = _attr(1, True)
        for name in parts:
            if not attr.is_dir:
                raise NotADirectory()
            attr = self.meta.lookup(attr.inode, name)
        return attr


KEYS = ["a.txt", "a/b", "a/c/d", "a-b/x", "a0", "a!/y", "b", "e/"]


def keys(handle: Any, prefix: str = "", after: str = "", recursive: bool = True) -> list[str]:
    return [
        i.key.decode() for i in walk(handle, prefix.encode(), after.encode(), recursive=recursive)
    ]


def test_recursive_order_is_utf8_byte_order() -> None:
    handle = FakeHandle(KEYS)
    assert keys(handle) == sorted(KEYS, key=str.encode)


def test_bounds_and_prefixes() -> None:
    handle = FakeHandle(KEYS)
    everything = sorted(KEYS, key=str.encode)
    for i, bound in enumerate(everything):
        assert keys(handle, after=bound) == everything[i + 1 :], bound
    assert keys(handle, prefix="a/") == ["a/b", "a/c/d"]
    assert keys(handle, prefix="a") == [k for k in everything if k.startswith("a")]
    assert keys(handle, prefix="e/") == ["e/"]
    assert keys(handle, prefix="zz/") == []
    assert keys(handle, recursive=False) == ["a!/", "a-b/", "a.txt", "a/", "a0", "b", "e/"]


def test_a_page_reads_about_a_page() -> None:
    handle = FakeHandle([f"d/f{i:06d}" for i in range(5000)])
    page = list_page(handle, b"", b"", b"d/f002000", 10)  # type: ignore[arg-type]
    assert [i.key for i in page.contents] == [f"d/f{i:06d}".encode() for i in range(2001, 2011)]
    assert page.truncated
    assert handle.meta.calls < 30  # lookups on the way down, one readdir page


def test_other_delimiters_group() -> None:
    handle = FakeHandle(KEYS)
    page = list_page(handle, b"", b".", b"", 1000)  # type: ignore[arg-type]
    assert page.prefixes == [b"a."]
    assert b"a.txt" not in [i.key for i in page.contents]
