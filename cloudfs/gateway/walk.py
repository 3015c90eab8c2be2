"""The keys of a volume in S3's order, walked lazily from a starting key.

S3 lists keys in the byte order of their UTF-8 spelling; the tree lists a
directory's names in byte order. The two differ: directory ``a`` holds keys
``a/...``, which sort *after* file ``a.txt`` ('.' < '/'). So the children of
a directory are merged in the order of their key at this level (``name`` for
a file, ``name + "/"`` for a directory) with a small heap: a directory waits
until the tree's names have passed its key.

Nothing is read that the page does not need: a walk starts at its bound (the
continuation token or start-after), skipping whole subtrees that sort before
it without reading them, and reads the tree 1000 names at a time, so a page of
a million-file volume reads about a page of names.

Which tree entries are keys (documented in docs/gateway.md): regular files;
an empty directory as its marker ``dir/`` (size 0), so directories made by
s3a, the console or ``mkdir`` stay visible; a non-empty directory has no key
of its own (its children imply it, as in S3). Symlinks and other special
files, and names that are not UTF-8, are not listed.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

from cloudfs.client.volume import VolumeHandle
from cloudfs.errors import NotADirectory, NotFound
from cloudfs.types import Attr, DirEntry, InodeId

PAGE = 1000


@dataclass(frozen=True, slots=True)
class Item:
    key: bytes  # UTF-8; a directory's ends in "/"
    attr: Attr
    is_prefix: bool  # a directory listed as a common prefix (non-recursive walks)


def walk(handle: VolumeHandle, prefix: bytes, after: bytes, *, recursive: bool) -> Iterator[Item]:
    """Keys starting with ``prefix``, greater than ``after``, in S3's order.

    ``recursive``: every key below (files and empty directories' markers);
    otherwise one level, as a "/" delimiter lists it: the files of the level and
    its directories as prefixes (``is_prefix``).
    """
    dir_part, slash, name_prefix = prefix.rpartition(b"/")
    parts = tuple(dir_part.split(b"/")) if slash else ()
    if any(p in (b"", b".", b"..") for p in parts):
        return  # no key of the tree can start so
    try:
        attr = handle.resolve(parts)
    except (NotFound, NotADirectory):
        return
    if not attr.is_dir:
        return
    base = dir_part + b"/" if slash else b""
    if parts and not name_prefix and base > after and _is_empty(handle, attr.inode):
        yield Item(base, attr, False)  # the prefix names an empty directory: its marker
        return
    yield from _level(handle, attr.inode, base, name_prefix, after, recursive)


def _level(
    handle: VolumeHandle,
    inode: InodeId,
    base: bytes,
    name_prefix: bytes,
    after: bytes,
    recursive: bool,
) -> Iterator[Item]:
    if after.startswith(base):
        start = max(after[len(base) :].split(b"/", 1)[0], name_prefix)
    elif after > base:
        return  # every key here sorts before the bound
    else:
        start = name_prefix
    for entry in _ordered(handle, inode, start, name_prefix):
        name = base + entry.name
        if entry.attr.is_reg:
            if name > after:
                yield Item(name, entry.attr, False)
            continue
        key = name + b"/"
        if not recursive:
            if key > after:
                yield Item(key, entry.attr, True)
        elif after.startswith(key) or key > after:
            if _is_empty(handle, entry.attr.inode):
                if key > after:
                    yield Item(key, entry.attr, False)
            else:
                yield from _level(handle, entry.attr.inode, key, b"", after, True)


def _ordered(
    handle: VolumeHandle, inode: InodeId, start: bytes, name_prefix: bytes
) -> Iterator[DirEntry]:
    """The listable children of a directory with names starting with ``name_prefix``, in
    the order of their keys, from the first whose key may be at or after ``start``."""
    waiting: list[tuple[bytes, DirEntry]] = []  # directories by key (name + "/")
    # A directory named by a proper prefix of ``start`` sorts at or after it ("a/" > "a.txt").
    for end in range(max(len(name_prefix), 1), len(start)):
        entry = _lookup(handle, inode, start[:end])
        if entry is not None and entry.attr.is_dir:
            heapq.heappush(waiting, (entry.name + b"/", entry))
    for entry in _names_from(handle, inode, start):
        if not entry.name.startswith(name_prefix):
            break
        while waiting and waiting[0][0] < entry.name:
            yield heapq.heappop(waiting)[1]
        if entry.attr.is_dir:
            heapq.heappush(waiting, (entry.name + b"/", entry))
        elif entry.attr.is_reg:
            yield entry
    while waiting:
        yield heapq.heappop(waiting)[1]


def _names_from(handle: VolumeHandle, inode: InodeId, start: bytes) -> Iterator[DirEntry]:
    """The tree's entries with names >= ``start``, in name order, a page at a time."""
    after: bytes | None = None
    if start:
        first = _lookup(handle, inode, start)
        if first is not None:
            yield first
        after = start
    while True:
        page = handle.meta.readdir(inode, after, PAGE)
        for entry in page:
            if _listable(entry.name):
                yield entry
        if len(page) < PAGE:
            return
        after = page[-1].name


def _lookup(handle: VolumeHandle, inode: InodeId, name: bytes) -> DirEntry | None:
    if not _listable(name):
        return None
    try:
        return DirEntry(name, handle.meta.lookup(inode, name))
    except NotFound:
        return None


def _listable(name: bytes) -> bool:
    try:
        name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _is_empty(handle: VolumeHandle, inode: InodeId) -> bool:
    return not handle.meta.readdir(inode, None, 1)
