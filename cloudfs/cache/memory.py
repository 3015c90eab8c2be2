"""MemoryBlockCache: the hot tier, an LRU of immutable ``bytes`` blocks in RAM.

Blocks are stored and returned as the same ``bytes`` objects (no copies): the
reader slices them with ``memoryview`` and copies only the bytes a request
asks for. Every operation is O(1) under one ``threading.Lock`` and does no I/O,
so the trio thread may call it directly.

Capacity counts payload bytes. A block larger than the whole capacity is
declined rather than allowed to flush everything else. ``on_drop(key)`` is
called, under the lock, for every block evicted or discarded (the prefetch
ledger counts unread ones as wasted); it must be cheap and must not call back.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from cloudfs.cache.counters import TierCounters
from cloudfs.cache.interface import TierStats
from cloudfs.metrics import Metrics


class MemoryBlockCache:
    def __init__(
        self,
        capacity_bytes: int,
        metrics: Metrics,
        tier: str = "memory",
        *,
        on_drop: Callable[[str], None] | None = None,
    ) -> None:
        if capacity_bytes < 0:
            raise ValueError("capacity_bytes must be >= 0")
        self._tier = tier
        self._capacity = capacity_bytes
        self._lock = threading.Lock()
        self._blocks: OrderedDict[str, bytes] = OrderedDict()  # LRU first, MRU last
        self._counters = TierCounters(metrics, tier, capacity_bytes)
        self._on_drop = on_drop or (lambda key: None)

    @property
    def tier(self) -> str:
        return self._tier

    def get(self, key: str, size_hint: int = 0) -> bytes | None:
        with self._lock:
            data = self._blocks.get(key)
            if data is None:
                self._counters.miss(size_hint)
                return None
            self._blocks.move_to_end(key)
            self._counters.hit(len(data))
            return data

    def read_range(self, key: str, offset: int, length: int, size_hint: int = 0) -> bytes | None:
        data = self.get(key, size_hint)
        if data is None:
            return None
        if offset == 0 and length >= len(data):
            return data
        return data[offset : offset + length]

    def read_range_nowait(self, key: str, offset: int, length: int) -> bytes | None:
        with self._lock:
            if key not in self._blocks:
                return None
        return self.read_range(key, offset, length)

    def put(self, key: str, data: bytes) -> None:
        data = bytes(data)  # no copy for bytes; freezes bytearray/memoryview
        if len(data) > self._capacity:
            return
        with self._lock:
            old = self._blocks.pop(key, None)
            if old is not None:
                self._counters.removed(len(old), evicted=False)
            while self._blocks and self._counters.bytes + len(data) > self._capacity:
                victim_key, victim = self._blocks.popitem(last=False)
                self._counters.removed(len(victim), evicted=True)
                self._on_drop(victim_key)
            self._blocks[key] = data
            self._counters.added(len(data))

    def discard(self, key: str) -> None:
        with self._lock:
            old = self._blocks.pop(key, None)
            if old is not None:
                self._counters.removed(len(old), evicted=False)
                self._on_drop(key)

    def contains(self, key: str) -> bool:
        with self._lock:
            return key in self._blocks

    def miss_if_absent(self, key: str, size_hint: int = 0) -> bool:
        with self._lock:
            if key in self._blocks:
                return False
            self._counters.miss(size_hint)
            return True

    def stats(self) -> TierStats:
        with self._lock:
            return self._counters.snapshot()
