"""ThreadFlights: concurrent callers of one key share one fetch (threads).

The cache worker answers each block GET in a thread of its HTTP server, so the
mounts asking for one cold block at once arrive on different threads; the
first runs the fetch (one GET to the object store), the others wait for it
and get the same bytes or the same error. ``cloudfs.cache.singleflight`` is
the mount's trio version of this; it cannot be shared across threads.

An entry leaves the table when its fetch ends, so a later call fetches again
(normally it finds the block in the tiers the leader filled). Waiting is
bounded: a follower gives up after ``wait_seconds`` (the leader's fetch is
bounded by the store's own timeouts and retries, so this is a backstop).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from cloudfs.errors import RemoteIOError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Call(Generic[V]):
    __slots__ = ("done", "error", "followers", "value")

    def __init__(self) -> None:
        self.followers = 0
        self.done = threading.Event()
        self.value: V | None = None
        self.error: BaseException | None = None


class ThreadFlights(Generic[K, V]):
    def __init__(self, wait_seconds: float = 300.0) -> None:
        self._lock = threading.Lock()
        self._calls: dict[K, _Call[V]] = {}
        self._wait = wait_seconds

    def __len__(self) -> int:
        with self._lock:
            return len(self._calls)

    def followers(self, key: K) -> int:
        """How many callers wait for the fetch of ``key`` now (0 if none runs)."""
        with self._lock:
            call = self._calls.get(key)
            return 0 if call is None else call.followers

    def do(self, key: K, fetch: Callable[[], V]) -> tuple[V, bool]:
        """``fetch()``'s value for every concurrent caller of ``key``, and whether this
        caller ran it. Raises what ``fetch`` raised, in every caller."""
        with self._lock:
            call = self._calls.get(key)
            leader = call is None
            if call is None:
                call = self._calls[key] = _Call()
            else:
                call.followers += 1
        if leader:
            return self._lead(key, call, fetch), True
        if not call.done.wait(self._wait):
            raise RemoteIOError(f"no answer within {self._wait:g} s from the fetch of {key!r}")
        if call.error is not None:
            if isinstance(call.error, Exception):
                raise call.error
            raise RemoteIOError("the fetch this call waited for was interrupted")
        return call.value, False  # type: ignore[return-value]

    def _lead(self, key: K, call: _Call[V], fetch: Callable[[], V]) -> V:
        try:
            value = call.value = fetch()
        except BaseException as exc:
            call.error = exc
            raise
        finally:
            with self._lock:
                del self._calls[key]
            call.done.set()
        return value
