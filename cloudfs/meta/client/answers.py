"""Answers: what a mount remembers of the tree service's answers, for ``DetachedReads``.

Keys are ``(what, its arguments...)``: ``("lookup", parent, name)``,
``("getattr", inode)``, ``("readdir", inode, after, limit)``, ... A value is the
answer, or the ``FsError`` a read raised (a negative lookup). At most
``max_entries`` are held (a listing page counts one per name), the least
recently used dropped first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from cloudfs.types import Attr, InodeId

Key = tuple[Any, ...]  # (what, its arguments...)
MISS = object()
_BY_INODE = ("readdir", "getxattr")  # keys with more than the inode, indexed by it


def _weight(value: object) -> int:  # a listing page counts one per name
    return max(1, len(value)) if isinstance(value, list) else 1


class Answers:
    def __init__(self, max_entries: int) -> None:
        self._max = max_entries
        self._known: OrderedDict[Key, object] = OrderedDict()
        self.size = 0  # entries held
        self._by_inode: dict[InodeId, set[Key]] = {}  # inode -> its readdir and getxattr keys
        self._lock = threading.Lock()
        self.answered = 0  # recalled (reads answered while detached)

    def remember(self, key: Key, value: object) -> None:
        with self._lock:
            self._drop(key)
            self._known[key] = value
            self.size += _weight(value)
            if key[0] in _BY_INODE:
                self._by_inode.setdefault(key[1], set()).add(key)
            while self.size > self._max and self._known:
                self._drop(next(iter(self._known)))

    def _drop(self, key: Key) -> None:
        """Forget ``key`` (the lock held)."""
        value = self._known.pop(key, MISS)
        if value is not MISS:
            self.size -= _weight(value)
            if key[0] in _BY_INODE:
                self._by_inode.get(key[1], set()).discard(key)

    def recall(self, key: Key) -> object:
        """The answer at ``key`` (``MISS`` if none), counted as used."""
        with self._lock:
            value = self._known.get(key, MISS)
            if value is not MISS:
                self._known.move_to_end(key)
                self.answered += 1
            return value

    def peek(self, key: Key) -> object:
        """The answer at ``key`` (None if none), not counted as used."""
        with self._lock:
            return self._known.get(key)

    def forget(
        self, inodes: tuple[InodeId, ...], entries: tuple[tuple[InodeId, bytes], ...]
    ) -> None:
        """Drop what the change of ``inodes`` (attributes, xattrs, listings) and of the
        names ``entries`` (and so their parents' listings) makes stale."""
        with self._lock:
            for inode in inodes:  # keys change only by rename and unlink (forget_keys)
                for kind in ("getattr", "readlink", "listxattr"):
                    self._drop((kind, inode))
            # A directory's own attributes are kept (only its times and link count moved):
            # the kernel asks for them before every change in it.
            for inode in (*inodes, *(parent for parent, _ in entries)):
                for key in self._by_inode.pop(inode, set()):
                    self._drop(key)
            for parent, name in entries:
                self._drop(("lookup", parent, name))

    def forget_keys(self, moved: object) -> None:
        """``moved`` (a lookup's answer) was renamed or unlinked: a file's key is its own;
        a directory's (or an unknown's) move changes every key below it."""
        with self._lock:
            if isinstance(moved, Attr) and not moved.is_dir:
                stale = [("object_key", moved.inode)]
            else:
                stale = [k for k in self._known if k[0] == "object_key"]
            for key in stale:
                self._drop(key)
