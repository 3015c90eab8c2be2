"""The namespace lock of one tree: one namespace change at a time, in every server.

A namespace change (create, rename, unlink...) reads the tree, may call the
UFS (delete, rename or make a marker object), then writes the tree; what the
read decided must still hold when the write commits. Within one process a
reentrant lock gives that. When several tree servers share one engine (etcd),
the lock must also hold across them: ``NamespaceLock`` then takes the
engine's ``Mutex`` (``SharedKV.mutex``) when this process's outermost holder
enters, and gives it back when that holder leaves, so the cross-server lock
costs two round trips per change, not per nested section.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Protocol


class Mutex(Protocol):
    """A lock several processes share (``cloudfs.meta.server.etcd_lock.EtcdMutex``)."""

    def acquire(self) -> None:
        """Block until held. Raises ``RemoteIOError`` (EIO) when that takes too long."""

    def release(self) -> None:
        """Give it back (best effort: an unreleased one expires by itself)."""


class NamespaceLock:
    """Reentrant within this process; held across processes too when ``shared`` is given."""

    def __init__(self, shared: Mutex | None = None) -> None:
        self._local = threading.RLock()
        self._depth = 0  # nesting of the thread that holds _local
        self._shared = shared

    def __enter__(self) -> NamespaceLock:
        self._local.acquire()
        self._depth += 1
        if self._depth == 1 and self._shared is not None:
            try:
                self._shared.acquire()
            except BaseException:
                self._depth -= 1
                self._local.release()
                raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._depth -= 1
        try:
            if self._depth == 0 and self._shared is not None:
                self._shared.release()
        finally:
            self._local.release()
