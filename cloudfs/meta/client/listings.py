"""Listings: the directories whose every name this mount knows, so a missing name is free.

A detached mount can create a name only where it knows the name is free. It
knows that of a directory it listed to the end through the tree service (page
by page, in order) and of one it made, and it keeps each such set of names as
its own changes add and remove them. Other mounts' changes made since the
listing are not in it: a name one of them took meanwhile is a conflict at the
replay (``detached_writes.py``), settled there.
"""

from __future__ import annotations

import threading

from cloudfs.types import InodeId

MAX_DIRECTORIES = 4096  # the least recently listed go first
MAX_NAMES = 100_000  # a directory larger than this is not kept


class Listings:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._whole: dict[InodeId, set[bytes]] = {}
        self._partial: dict[InodeId, tuple[bytes, set[bytes]]] = {}  # last name seen

    def page(self, inode: InodeId, after: bytes | None, limit: int, names: list[bytes]) -> None:
        """A page of ``inode``'s listing came from the service (``after``: where it began)."""
        with self._lock:
            if after is None:
                seen: set[bytes] = set()
            else:
                last, known = self._partial.pop(inode, (b"", None))
                if known is None or last != after:
                    return  # not the page after the last one seen
                seen = known
            seen.update(names)
            if len(names) >= limit:
                self._partial[inode] = (names[-1], seen)
            elif len(seen) <= MAX_NAMES:
                self._whole.pop(inode, None)
                self._whole[inode] = seen
                while len(self._whole) > MAX_DIRECTORIES:
                    del self._whole[next(iter(self._whole))]

    def made(self, inode: InodeId) -> None:
        """A directory this mount made: empty, and known whole."""
        with self._lock:
            self._whole[inode] = set()

    def added(self, parent: InodeId, name: bytes) -> None:
        with self._lock:
            if parent in self._whole:
                self._whole[parent].add(name)

    def removed(self, parent: InodeId, name: bytes) -> None:
        with self._lock:
            if parent in self._whole:
                self._whole[parent].discard(name)

    def lacks(self, parent: InodeId, name: bytes) -> bool:
        """Whether ``parent`` is known whole and ``name`` is not in it."""
        with self._lock:
            names = self._whole.get(parent)
            return names is not None and name not in names

    def names(self, parent: InodeId) -> list[bytes] | None:
        """``parent``'s names in order, if it is known whole."""
        with self._lock:
            names = self._whole.get(parent)
            return None if names is None else sorted(names)
