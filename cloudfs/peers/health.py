"""MemberHealth: which cache-group members a mount leaves out for now.

A member that failed (not reached, no answer within the deadline, token
refused) is left out for a back-off that doubles with each failure in a row
(``first`` up to ``longest`` seconds); its blocks go to their next owner in
the ring meanwhile. When the back-off ends, one call probes the member (for
``probe_window`` seconds nobody else uses it); its success makes the member
usable again, its failure starts the next, longer back-off. So a dead
worker costs the group one failed call per back-off, not one per block, and
a worker that comes back is used again within ``longest`` seconds.

Thread-safe (the mount's peer calls run in worker threads); ``clock`` is
injectable for tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _Failing:
    failures: int
    until: float  # left out before this time (a back-off, or a probe in flight)


class MemberHealth:
    def __init__(
        self,
        *,
        first: float = 2.0,
        longest: float = 30.0,
        probe_window: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._first = first
        self._longest = longest
        self._probe_window = probe_window
        self._clock = clock
        self._lock = threading.Lock()
        self._failing: dict[str, _Failing] = {}

    def usable(self, member: str) -> bool:
        """Whether to ask ``member`` now; True for a failing one means "probe it"."""
        with self._lock:
            state = self._failing.get(member)
            if state is None:
                return True
            now = self._clock()
            if now < state.until:
                return False
            state.until = now + self._probe_window  # the others wait for this probe
            return True

    def succeeded(self, member: str) -> None:
        with self._lock:
            self._failing.pop(member, None)

    def failed(self, member: str) -> float:
        """Leave ``member`` out for its next back-off; returns its length in seconds."""
        with self._lock:
            state = self._failing.setdefault(member, _Failing(0, 0.0))
            state.failures += 1
            backoff = min(self._first * (1 << min(state.failures - 1, 30)), self._longest)
            state.until = self._clock() + backoff
            return backoff

    def failing(self) -> list[str]:
        """The members left out or on probation now."""
        with self._lock:
            return sorted(self._failing)
