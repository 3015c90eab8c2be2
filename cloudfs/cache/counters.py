"""Hit/miss/eviction bookkeeping shared by the cache tiers.

Each tier keeps its own plain counters (for ``stats()`` and tests, independent
of how many tiers share one Prometheus registry) and mirrors every change into
the injected ``Metrics`` under its ``tier`` label. Not thread-safe by itself:
the owning tier calls it while holding its own lock.
"""

from __future__ import annotations

from cloudfs.cache.interface import TierStats
from cloudfs.metrics import Metrics


class TierCounters:
    def __init__(self, metrics: Metrics, tier: str, capacity_bytes: int) -> None:
        self.tier = tier
        self.capacity_bytes = capacity_bytes
        self.hits = 0
        self.misses = 0
        self.hit_bytes = 0
        self.miss_bytes = 0
        self.evictions = 0
        self.bytes = 0
        self.blocks = 0
        self._hits = metrics.cache_hits.labels(tier=tier)
        self._misses = metrics.cache_misses.labels(tier=tier)
        self._hit_bytes = metrics.cache_hit_bytes.labels(tier=tier)
        self._miss_bytes = metrics.cache_miss_bytes.labels(tier=tier)
        self._evictions = metrics.cache_evictions.labels(tier=tier)
        self._bytes_gauge = metrics.cache_bytes.labels(tier=tier)
        self._blocks_gauge = metrics.cache_blocks.labels(tier=tier)
        metrics.cache_capacity.labels(tier=tier).set(capacity_bytes)
        self._publish_occupancy()

    def hit(self, nbytes: int) -> None:
        self.hits += 1
        self.hit_bytes += nbytes
        self._hits.inc()
        self._hit_bytes.inc(nbytes)

    def miss(self, size_hint: int) -> None:
        self.misses += 1
        self.miss_bytes += size_hint
        self._misses.inc()
        if size_hint:
            self._miss_bytes.inc(size_hint)

    def added(self, nbytes: int) -> None:
        self.bytes += nbytes
        self.blocks += 1
        self._publish_occupancy()

    def removed(self, nbytes: int, *, evicted: bool) -> None:
        self.bytes -= nbytes
        self.blocks -= 1
        if evicted:
            self.evictions += 1
            self._evictions.inc()
        self._publish_occupancy()

    def snapshot(self) -> TierStats:
        return TierStats(
            tier=self.tier,
            hits=self.hits,
            misses=self.misses,
            hit_bytes=self.hit_bytes,
            miss_bytes=self.miss_bytes,
            evictions=self.evictions,
            bytes=self.bytes,
            blocks=self.blocks,
            capacity_bytes=self.capacity_bytes,
        )

    def _publish_occupancy(self) -> None:
        self._bytes_gauge.set(self.bytes)
        self._blocks_gauge.set(self.blocks)
