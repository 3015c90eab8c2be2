"""Belady eviction: evict the cached block whose next use is farthest in the future.

When a training job announces each epoch's file order ahead of time
(``cloudfs/epoch/``), the future is known, and Belady's rule (Belady 1966,
"A study of replacement algorithms for a virtual-storage computer") is
optimal: evict the block that is next read farthest away, and refuse a new
block that is itself needed later than everything cached ("bypass"). For
blocks of one size this is the offline optimum; a shuffled scan of a dataset
twice the cache then keeps the half that fits every epoch, where LRU keeps
what the next epoch reads last.

A ``Ranker`` knows the future: ``rank(key)`` is when ``key`` is next read
(smaller is sooner), ``NOT_NEEDED`` if no announced read needs it. The ranker
owns the ranks; the tier is told which keys' ranks changed
(``DiskBlockCache.reranked``) and asks for their new ranks.

``RankIndex`` keeps one cache directory's blocks in eviction order -- largest
rank first, least recently used first among equal ranks (so the blocks no
announced read needs leave in plain LRU order) -- as a lazy max-heap: each
held key has one filed heap entry (its rank and recency when filed); entries
that no longer match are skipped or re-filed when they reach the top.
Recency only grows (an access makes a block younger, so its filed entry errs
towards evicting it sooner) and is fixed when the entry surfaces, so an
access costs one dict store; a rank change is pushed by ``rerank``. Every
operation is O(log n) amortised; the heap is rebuilt when stale entries
outnumber live ones. Not thread-safe: the owning tier calls it under its lock.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import NamedTuple, Protocol

NOT_NEEDED: int = 1 << 62  # rank of a block no announced future reads

_SLACK = 64  # stale heap entries tolerated on top of 2 per held key


class Ranker(Protocol):
    def rank(self, key: str) -> int:
        """When block ``key`` is next read in the announced future: smaller is sooner;
        NOT_NEEDED if never. Cheap (a dict lookup), thread-safe, callable under the tier's lock."""
        ...


class Victim(NamedTuple):
    """A block taken off the heap as the next to evict: its key, rank and recency."""

    key: str
    rank: int
    tick: int


_Entry = tuple[int, int, str]  # (-rank, tick, key): heapq's smallest is the next victim


class RankIndex:
    """The blocks of one cache directory in Belady eviction order (see the module doc)."""

    def __init__(self, ranker: Ranker, keys: Iterable[str]) -> None:
        """Index ``keys``, the held blocks from least to most recently used."""
        self._ranker = ranker
        self._ticks: dict[str, int] = {}  # held key -> recency (larger is more recent)
        self._filed: dict[str, tuple[int, int]] = {}  # held key -> its live entry's (-rank, tick)
        self._heap: list[_Entry] = []
        self._clock = 0
        for key in keys:
            self._ticks[key] = self._tick()
        self._rebuild()

    def __len__(self) -> int:
        return len(self._ticks)

    def add(self, key: str) -> None:
        """``key`` was stored (new or rewritten): held, most recently used."""
        self._ticks[key] = self._tick()
        self._file(key)

    def touch(self, key: str) -> None:
        """``key`` was read: most recently used (the heap entry is fixed lazily)."""
        if key in self._ticks:
            self._ticks[key] = self._tick()

    def remove(self, key: str) -> None:
        """``key`` left the cache (its heap entries go stale)."""
        self._ticks.pop(key, None)
        self._filed.pop(key, None)

    def rerank(self, key: str) -> None:
        """The ranker's rank of ``key`` changed; ignored if ``key`` is not held."""
        if key in self._ticks:
            self._file(key)

    def pop(self) -> Victim | None:
        """Take the next victim off the heap (it stays held: ``unpop`` it or ``remove`` it).

        None only if no held block is left on the heap.
        """
        heap = self._heap
        while heap:
            neg_rank, tick, key = heap[0]
            if self._filed.get(key) != (neg_rank, tick):
                heapq.heappop(heap)  # superseded, removed, or a duplicate of one taken
                continue
            current = self._entry(key)
            if current[:2] != (neg_rank, tick):
                self._filed[key] = current[:2]  # younger, or re-ranked unannounced
                heapq.heapreplace(heap, current)
                continue
            heapq.heappop(heap)
            del self._filed[key]
            return Victim(key, -neg_rank, tick)
        return None

    def unpop(self, victims: Iterable[Victim]) -> None:
        """Put back victims taken by ``pop`` that are still held."""
        for victim in victims:
            if victim.key in self._ticks and victim.key not in self._filed:
                self._filed[victim.key] = (-victim.rank, victim.tick)
                heapq.heappush(self._heap, (-victim.rank, victim.tick, victim.key))

    # -- internals -------------------------------------------------------------

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _entry(self, key: str) -> _Entry:
        return (-self._ranker.rank(key), self._ticks[key], key)

    def _file(self, key: str) -> None:
        """Push ``key``'s present rank and recency, unless that is its live entry already."""
        entry = self._entry(key)
        if self._filed.get(key) == entry[:2]:
            return
        self._filed[key] = entry[:2]
        heapq.heappush(self._heap, entry)
        if len(self._heap) > 2 * len(self._ticks) + _SLACK:
            self._rebuild()

    def _rebuild(self) -> None:
        """One fresh entry per held key: O(n), once per n stale pushes."""
        self._heap = [self._entry(key) for key in self._ticks]
        heapq.heapify(self._heap)
        self._filed = {key: (neg_rank, tick) for neg_rank, tick, key in self._heap}
