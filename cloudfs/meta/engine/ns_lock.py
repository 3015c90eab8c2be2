"""The namespace lock of one tree: one exclusive change at a time, in every server.

Namespace changes do not take it (``reserve``): only a rename that moves a
directory present in the UFS (every key below it changes) and the merge of a
UFS listing do. Such a change reads the tree, may call the UFS, then writes
the tree; what the read decided must still hold when the write commits. Within one process a
reentrant lock gives that. When several tree servers share one engine (etcd),
the lock must also hold across them: ``NamespaceLock`` then takes the
engine's ``Mutex`` (``SharedKV.mutex``) when this process's outermost holder
enters, and gives it back when that holder leaves, so the cross-server lock
costs two round trips per change, not per nested section.

Under load those two round trips are most of a change's time in the lock, so
a holder that leaves while other threads of this process wait for the lock
passes the shared mutex on to the next one (``Mutex.lend``/``resume``, no
round trip) instead of giving it back. For fairness to the other servers,
passing on stops after ``PASS_ON_FOR`` seconds: the mutex is then given back,
and this process's next take waits ``YIELD_FOR`` first, longer than a
waiting server's poll pause, so that server gets its turn.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Protocol

PASS_ON_FOR = 0.5  # seconds one take of the shared mutex may be passed between threads
YIELD_FOR = 0.06  # seconds before taking it again after such a run (etcd_lock.PAUSE_MAX: 0.05)


class Mutex(Protocol):
    """A lock several processes share (``cloudfs.meta.engine.etcd_lock.EtcdMutex``)."""

    def acquire(self) -> None:
        """Block until held. Raises ``RemoteIOError`` (EIO) when that takes too long."""

    def release(self) -> None:
        """Give it back (best effort: an unreleased one expires by itself)."""

    def lend(self) -> None:
        """Stop holding it in this thread, keeping it taken for another (``resume``)."""

    def resume(self) -> None:
        """Hold it in this thread, as another thread's ``lend`` left it."""


class NamespaceLock:
    """Reentrant within this process; held across processes too when ``shared`` is given."""

    def __init__(self, shared: Mutex | None = None) -> None:
        self._local = threading.RLock()
        self._depth = 0  # nesting of the thread that holds _local
        self._shared = shared
        self._waiting = 0  # threads blocked on _local (under _count)
        self._count = threading.Lock()
        self._lent = False  # the shared mutex is taken and waits for the next holder
        self._taken_at = 0.0  # when the shared mutex was last taken (monotonic)
        self._not_before = 0.0  # no new take before this (after a fairness give-back)

    def __enter__(self) -> NamespaceLock:
        with self._count:
            self._waiting += 1
        try:
            self._local.acquire()
        finally:
            with self._count:
                self._waiting -= 1
        self._depth += 1
        if self._depth == 1 and self._shared is not None:
            try:
                self._take_shared()
            except BaseException:
                self._depth -= 1
                self._local.release()
                raise
        return self

    def _take_shared(self) -> None:
        assert self._shared is not None
        if self._lent:
            self._lent = False
            self._shared.resume()
            return
        pause = self._not_before - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        self._shared.acquire()
        self._taken_at = time.monotonic()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._depth -= 1
        try:
            if self._depth == 0 and self._shared is not None:
                self._leave_shared(failed=exc is not None)
        finally:
            self._local.release()

    def _leave_shared(self, failed: bool) -> None:
        """Pass the shared mutex on or give it back; after a failure (the lock may have
        been lost: EIO) always give it back."""
        assert self._shared is not None
        with self._count:
            others = self._waiting > 0
        if others and not failed:
            if time.monotonic() - self._taken_at < PASS_ON_FOR:
                self._shared.lend()
                self._lent = True
                return
            self._not_before = time.monotonic() + YIELD_FOR  # a long run: others' turn
        self._shared.release()
