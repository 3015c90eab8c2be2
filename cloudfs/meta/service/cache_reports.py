"""CacheReports: which nodes cache how many bytes of each volume, as the mounts said.

Every grpc:// mount reports every few seconds (``cloudfs/mount/cache_report.py``)
the bytes of its volume that its caches hold, with its node name and a
reporter id of its own (its tree session). The scheduler extender
(``cloudfs/k8s``) asks, per volume, for the bytes per node and places a pod
on the node that already holds its data.

Why in memory, not in the KV engine like the cache groups: a report is a
hint, a few dozen bytes, replaced every few seconds by each mount; writing
it to etcd as often buys nothing, since a restarted server is told again
within one interval. The cost: several tree servers behind one address each
know only the reports they took, so the extender should ask the one the
mounts report to (one Service address, session affinity), and a wrong or
missing report makes a score neutral, never a pod unschedulable.

A report is forgotten once its TTL (a few report intervals) has passed: a
mount that died or was unmounted stops counting. Thread-safe (one lock).
Errors: ``InvalidArgument`` (EINVAL) for a bad node, volume, reporter or TTL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cloudfs.errors import InvalidArgument

DEFAULT_TTL_MS = 90_000
MIN_TTL_MS = 1_000
MAX_TTL_MS = 600_000
MAX_NAME = 253  # a Kubernetes node name (DNS subdomain)
MAX_REPORTERS = 100_000  # reports held at once; past it, new reporters are refused


@dataclass(frozen=True, slots=True)
class _Report:
    cached_bytes: int
    expires_ns: int


def _check_name(what: str, value: str) -> None:
    if not 0 < len(value) <= MAX_NAME or not value.isprintable():
        raise InvalidArgument(f"bad {what} {value!r}: 1-{MAX_NAME} printable characters")


class CacheReports:
    def __init__(self, *, clock: Callable[[], int] = time.time_ns) -> None:
        """``clock``: ns since the epoch (injectable for tests)."""
        self._clock = clock
        self._lock = threading.Lock()
        # (volume, node, reporter) -> the last report
        self._reports: dict[tuple[str, str, str], _Report] = {}

    def report(
        self, volume: str, node: str, reporter: str, cached_bytes: int, ttl_ms: int = 0
    ) -> int:
        """Record that ``reporter`` on ``node`` caches ``cached_bytes`` of ``volume``,
        replacing its last report, for ``ttl_ms`` (0: ``DEFAULT_TTL_MS``). Returns the
        expiry (ns). Idempotent."""
        _check_name("volume", volume)
        _check_name("node name", node)
        _check_name("reporter", reporter)
        ttl = ttl_ms or DEFAULT_TTL_MS
        if not MIN_TTL_MS <= ttl <= MAX_TTL_MS:
            raise InvalidArgument(f"ttl_ms {ttl_ms} is not within {MIN_TTL_MS}..{MAX_TTL_MS}")
        now = self._clock()
        expiry = now + ttl * 1_000_000
        key = (volume, node, reporter)
        with self._lock:
            if key not in self._reports and len(self._reports) >= MAX_REPORTERS:
                self._expire_locked(now)
                if len(self._reports) >= MAX_REPORTERS:
                    raise InvalidArgument(f"too many cache reporters (over {MAX_REPORTERS})")
            self._reports[key] = _Report(max(0, cached_bytes), expiry)
        return expiry

    def cached_bytes(self, volume: str) -> dict[str, int]:
        """Node -> bytes of ``volume`` its live reports hold (summed over its mounts);
        nodes whose reports all expired are left out. An unknown volume: ``{}``."""
        now = self._clock()
        totals: dict[str, int] = {}
        with self._lock:
            for (vol, node, _), report in self._reports.items():
                if vol == volume and report.expires_ns >= now:
                    totals[node] = totals.get(node, 0) + report.cached_bytes
        return dict(sorted(totals.items()))

    def expire(self) -> int:
        """Forget every report past its TTL; returns how many."""
        with self._lock:
            return self._expire_locked(self._clock())

    def _expire_locked(self, now: int) -> int:
        stale = [key for key, report in self._reports.items() if report.expires_ns < now]
        for key in stale:
            del self._reports[key]
        return len(stale)
