"""SingleFlight: concurrent misses on one key share one fetch (trio, one thread).

Two ways to use it:

* ``await flights.do(key, fetch)`` -- the first caller runs ``fetch``; callers
  arriving while it runs wait and get the same value or the same exception.
* ``flights.claim(key)`` / ``flights.get(key)`` -- the low-level form the block
  reader uses to fetch *several* keys with one request: claim a ``Flight`` per
  key synchronously (so nobody else starts fetching them), then ``resolve``,
  ``fail`` or ``abandon`` each one. ``claim`` returns ``None`` if the key is
  already in flight; wait on ``get(key)`` instead.

Abandon vs fail: ``fail(exc)`` hands ``exc`` to every waiter (the fetch really
failed, e.g. the store raised ``RemoteIOError``). ``abandon()`` says "nobody
fetched it" (the leader was cancelled, or a best-effort prefetch gave up):
waiters get ``FlightAbandoned`` and must retry, becoming the leader themselves,
so a failed prefetch or a cancelled reader never poisons other readers.

An entry leaves the table the moment its flight finishes: a later call starts a
fresh fetch (which normally hits the cache the leader filled). Not thread-safe:
use it from trio tasks only.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

import trio  # trio 0.22 ships no py.typed

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class FlightAbandoned(Exception):
    """The flight finished without a result; the waiter should try again itself."""


class Flight(Generic[V]):
    """One in-flight fetch: finished exactly once by resolve, fail or abandon.

    ``on_finish(flight)`` is called once, when it finishes. The flight is
    passed in rather than captured by a closure on purpose: a closure over the
    flight would make a reference cycle, and a finished flight (holding a
    whole block) would then wait for Python's cyclic garbage collector, which
    counts objects, not bytes -- a mount streaming 4 MiB blocks grew by
    hundreds of MiB that way.
    """

    def __init__(self, on_finish: Callable[[Flight[V]], None]) -> None:
        self._on_finish: Callable[[Flight[V]], None] | None = on_finish
        self._done = trio.Event()
        self._value: V | None = None
        self._error: BaseException | None = None
        self._abandoned = False

    @property
    def finished(self) -> bool:
        return bool(self._done.is_set())

    def resolve(self, value: V) -> None:
        if self._finish():
            self._value = value

    def fail(self, error: BaseException) -> None:
        if self._finish():
            self._error = error

    def abandon(self) -> None:
        if self._finish():
            self._abandoned = True

    async def wait(self) -> V:
        """The value; raises the leader's error, or ``FlightAbandoned``."""
        await self._done.wait()
        if self._abandoned:
            raise FlightAbandoned()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def _finish(self) -> bool:
        if self._done.is_set():
            return False
        self._done.set()
        on_finish, self._on_finish = self._on_finish, None
        if on_finish is not None:
            on_finish(self)
        return True


class SingleFlight(Generic[K, V]):
    def __init__(self) -> None:
        self._flights: dict[K, Flight[V]] = {}

    def __len__(self) -> int:
        return len(self._flights)

    def __contains__(self, key: K) -> bool:
        return key in self._flights

    def get(self, key: K) -> Flight[V] | None:
        """The flight in progress for ``key``, if any."""
        return self._flights.get(key)

    def claim(self, key: K) -> Flight[V] | None:
        """Become the leader for ``key``; ``None`` if someone else already is.

        The caller must finish the returned flight (use try/finally: an
        unfinished flight would leave waiters blocked forever).
        """
        if key in self._flights:
            return None
        flight: Flight[V] = Flight(functools.partial(self._release, key))
        self._flights[key] = flight
        return flight

    async def do(self, key: K, fetch: Callable[[], Awaitable[V]]) -> V:
        """Run ``fetch`` once for all concurrent callers with the same ``key``."""
        while True:
            flight = self.claim(key)
            if flight is None:
                waiting = self._flights[key]
                try:
                    return await waiting.wait()
                except FlightAbandoned:
                    continue
            try:
                value = await fetch()
            except Exception as exc:
                flight.fail(exc)
                raise
            except BaseException:
                flight.abandon()
                raise
            flight.resolve(value)
            return value

    def _release(self, key: K, flight: Flight[V]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
