"""One lock per key (a directory inode, a file being committed), made on demand."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


class KeyedLocks:
    """``with locks.hold(key):`` serializes holders of the same key only."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[int, _Entry] = {}

    @contextmanager
    def hold(self, key: int) -> Iterator[None]:
        with self._guard:
            entry = self._entries.setdefault(key, _Entry())
            entry.users += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._guard:
                entry.users -= 1
                if entry.users == 0:
                    del self._entries[key]
