"""A bounded queue of ``Invalidation``s, read as a ``ChangeSource``.

The embedded tree puts here what its UFS listings changed (a file's new
ETag or size, a name gone or come), so the mount can drop it from the
kernel's caches (``cloudfs.fuse.invalidator.Invalidator``). Nobody may be
reading: the queue then fills up to ``limit`` and overflows. On overflow it
forgets everything queued and keeps one ``Invalidation(lost=True)`` in its
place (the reader must drop what it cached anyway), followed by what comes
next. ``close`` ends every ``changes()`` iterator at once. Thread-safe.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator

from cloudfs.meta.interface import Invalidation

QUEUE_LIMIT = 10_000


class ChangeQueue:
    def __init__(self, limit: int = QUEUE_LIMIT) -> None:
        self._limit = max(1, limit)
        self._cond = threading.Condition()
        self._items: deque[Invalidation] = deque()
        self._closed = False
        self.lost = 0  # overflows so far

    def put(self, change: Invalidation) -> None:
        """Queue ``change``; never blocks."""
        with self._cond:
            if self._closed:
                return
            if len(self._items) >= self._limit:
                self._items.clear()
                self._items.append(Invalidation(lost=True))
                self.lost += 1
            self._items.append(change)
            self._cond.notify_all()

    def changes(self) -> Iterator[Invalidation]:
        """Block for the next changes; ends when the queue is closed."""
        while True:
            with self._cond:
                while not self._items and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                change = self._items.popleft()
            yield change

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._items.clear()
            self._cond.notify_all()
