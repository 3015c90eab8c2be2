"""``FaultyObjectStore``: wrap any ObjectStore and make it slow or unreliable.

Fault-injection tests (uploader retries, read-path error handling, "no hang,
no silent success") need a store that fails on demand and reproducibly. Faults
are drawn from a private ``random.Random(seed)``, so a failing test replays with
the same seed. A fault raised *after* the inner call models the nastiest S3
case: the request succeeded but the reply was lost, so a retry must be
idempotent.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from cloudfs.errors import InvalidArgument, RemoteIOError
from cloudfs.ufs.forwarding import OPS, ForwardingObjectStore
from cloudfs.ufs.interface import ObjectStore

__all__ = ["OPS", "FaultStats", "FaultyObjectStore"]  # OPS: the op names ``ops`` takes

T = TypeVar("T")


@dataclass(frozen=True)
class FaultStats:
    """A snapshot of calls and injected failures, by op name."""

    calls: Mapping[str, int] = field(default_factory=dict)
    failures: Mapping[str, int] = field(default_factory=dict)

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def total_failures(self) -> int:
        return sum(self.failures.values())


class FaultyObjectStore(ForwardingObjectStore):
    """An ObjectStore that forwards to ``inner`` but injects delays and failures.

    Args:
        inner: the store to wrap.
        fail_ratio: probability in [0, 1] that a call to one of ``ops`` raises
            ``RemoteIOError("injected fault")``.
        delay: seconds to sleep before each call to one of ``ops``.
        seed: seed of the private random generator (None: unpredictable).
        ops: op names (``OPS``: the protocol's methods that make a request)
            subject to faults and delay (None: every op).
        fail_after: raise the fault after the inner call completed (its effect
            happened, the caller sees an error) instead of before reaching it.

    Thread-safe: the mount calls stores from many worker threads.
    """

    def __init__(
        self,
        inner: ObjectStore,
        *,
        fail_ratio: float = 0.0,
        delay: float = 0.0,
        seed: int | None = None,
        ops: Iterable[str] | None = None,
        fail_after: bool = False,
    ) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._calls: Counter[str] = Counter()
        self._failures: Counter[str] = Counter()
        self._fail_ratio = 0.0
        self._delay = 0.0
        self._ops: frozenset[str] = OPS
        self._fail_after = False
        self.configure(fail_ratio=fail_ratio, delay=delay, ops=ops, fail_after=fail_after)

    def configure(
        self,
        *,
        fail_ratio: float | None = None,
        delay: float | None = None,
        ops: Iterable[str] | None = None,
        fail_after: bool | None = None,
    ) -> None:
        """Change the fault settings mid-test (e.g. heal the store); None keeps a setting."""
        if fail_ratio is not None and not 0.0 <= fail_ratio <= 1.0:
            raise InvalidArgument(f"fail_ratio must be in [0, 1], got {fail_ratio}")
        if delay is not None and delay < 0:
            raise InvalidArgument(f"delay must be >= 0, got {delay}")
        chosen = frozenset(ops) if ops is not None else None
        if chosen is not None and not chosen <= OPS:
            raise InvalidArgument(f"unknown ops: {sorted(chosen - OPS)}")
        with self._lock:
            if fail_ratio is not None:
                self._fail_ratio = fail_ratio
            if delay is not None:
                self._delay = delay
            if chosen is not None:
                self._ops = chosen
            if fail_after is not None:
                self._fail_after = fail_after

    @property
    def stats(self) -> FaultStats:
        with self._lock:
            return FaultStats(
                calls=MappingProxyType(dict(self._calls)),
                failures=MappingProxyType(dict(self._failures)),
            )

    def _call(self, op: str, fn: Callable[[], T]) -> T:
        """Count the call, then maybe delay it and fail it (before or after ``fn``)."""
        with self._lock:
            self._calls[op] += 1
            targeted = op in self._ops
            delay = self._delay if targeted else 0.0
            fail = targeted and self._fail_ratio > 0 and self._rng.random() < self._fail_ratio
            after = self._fail_after
            if fail:
                self._failures[op] += 1
        if delay:
            time.sleep(delay)
        if fail and not after:
            raise RemoteIOError(f"injected fault ({op}, before the call)")
        result = fn()
        if fail:
            if hasattr(result, "close"):
                result.close()  # a lost get_stream reply must not leak its connection
            raise RemoteIOError(f"injected fault ({op}, after the call)")
        return result
