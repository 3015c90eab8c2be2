"""Admission policies: whether a new block may displace the disk tier's LRU victim.

Plain LRU admits everything. When every epoch of a training job scans a
dataset larger than the cache, that is the worst policy there is: each block
is evicted just before it is read again, and from the second epoch on the hit
ratio is zero. ``TinyLfuAdmission`` (Einziger, Friedman & Manes, "TinyLFU: A
Highly Efficient Cache Admission Policy", 2017; Caffeine and Ristretto use it)
keeps an approximate access frequency of every key it has seen, cached or not,
and lets a candidate in only if it was asked for more often than the block it
would evict. In a repeated scan all blocks are equally frequent, ties keep
what is cached, and so the part of the dataset that fits stays cached: the
hit ratio from the second epoch on is about cache size / dataset size instead
of zero.

The candidate's count is taken from before the miss that brought it (every
``put`` follows a ``get`` that recorded it). Counting that miss too breaks
scans: in epoch n the candidate has n accesses and the LRU victim, the block
the scan reads next, still n - 1; one over-counted key (a sketch collision)
then starts a cascade in which each miss evicts the next block read, and a
whole epoch misses. Frequencies are halved every ``10 x capacity`` accesses, so a new
working set displaces an old one after a while.

The frequency sketch is a count-min sketch of 4-bit counters (4 rows, the
width a power of two of at least 8 counters per cached block), indexed by
double hashing of the key's 64-bit BLAKE2b digest: the same in every process,
so a cache's admissions (and a test of them) do not vary with Python's
per-process string hash seed. Memory is a few bytes per cached block. Not
thread-safe: the owning tier calls it under its lock.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

POLICIES = ("tinylfu", "lru")

_ROWS = 4
_MAX_COUNT = 15
_HALVE = bytes(i >> 1 for i in range(256))


class Admission(Protocol):
    def record(self, key: str) -> None:
        """``key`` was asked for (a hit or a miss)."""
        ...

    def admit(self, candidate: str, victim: str) -> bool:
        """Whether ``candidate`` may evict ``victim`` to get in."""
        ...


class AdmitAll:
    """Plain LRU: every block gets in."""

    def record(self, key: str) -> None:
        pass

    def admit(self, candidate: str, victim: str) -> bool:
        return True


class FrequencySketch:
    """Approximate access counts (never under-counted, saturating at 15), periodically halved."""

    def __init__(self, expected_keys: int) -> None:
        width = 64
        while width < 8 * max(expected_keys, 1):
            width *= 2
        self._mask = width - 1
        self._rows = [bytearray(width) for _ in range(_ROWS)]
        self._sample = 10 * max(expected_keys, 8)
        self._additions = 0

    def _slots(self, key: str) -> list[int]:
        h = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
        step = (h >> 32) | 1
        return [(h + i * step) & self._mask for i in range(_ROWS)]

    def frequency(self, key: str) -> int:
        return min(row[slot] for row, slot in zip(self._rows, self._slots(key), strict=True))

    def increment(self, key: str) -> None:
        slots = self._slots(key)
        current = min(row[slot] for row, slot in zip(self._rows, slots, strict=True))
        if current >= _MAX_COUNT:
            return
        for row, slot in zip(self._rows, slots, strict=True):
            if row[slot] == current:  # conservative update: only the minimal counters grow
                row[slot] = current + 1
        self._additions += 1
        if self._additions >= self._sample:
            self._age()

    def _age(self) -> None:
        self._additions //= 2
        for i, row in enumerate(self._rows):
            self._rows[i] = bytearray(row.translate(_HALVE))


class TinyLfuAdmission:
    """Admit a candidate only if it was more frequent than the victim before its
    own miss (ties keep the victim)."""

    def __init__(self, expected_keys: int) -> None:
        self._sketch = FrequencySketch(expected_keys)

    def record(self, key: str) -> None:
        self._sketch.increment(key)

    def admit(self, candidate: str, victim: str) -> bool:
        before_this_miss = self._sketch.frequency(candidate) - 1
        return before_this_miss > self._sketch.frequency(victim)


def make_admission(policy: str, expected_keys: int) -> Admission:
    """The admission policy named ``policy`` (one of ``POLICIES``)."""
    if policy == "tinylfu":
        return TinyLfuAdmission(expected_keys)
    if policy == "lru":
        return AdmitAll()
    raise ValueError(f"unknown cache policy {policy!r} (choose from {', '.join(POLICIES)})")
