"""WarmUp: fetching blocks before anyone reads them.

* ``fetch_on_open``: a one-block object's block, as soon as it is opened (its
  first read will want all of it); best effort, in the read-ahead nursery and
  within the global read-ahead budget (``ReadAhead``).
* ``prefetch_whole``: every block of an object not cached yet (``cloudfs
  warmup``, a job's announced epoch), to the disk tier when there is one.
* ``warm_in_group``: every block of an object held by its owner in the cache
  group, no copy here.
"""

from __future__ import annotations

import logging

from cloudfs.cache.singleflight import Flight
from cloudfs.data.blocks import ObjectRef, block_count, consecutive_runs
from cloudfs.data.loader import BlockLoader, Claimed
from cloudfs.data.readahead import ReadAhead

log = logging.getLogger(__name__)

# Warm-up with a cache group: blocks asked of the group at once per file (each is a
# whole block in memory until stored; the announced order warms tens of files at once).
PEER_BATCH_BLOCKS = 4


class WarmUp:
    def __init__(self, loader: BlockLoader, ahead: ReadAhead) -> None:
        """``ahead``: whose nursery and budget fetches on open use."""
        self._loader = loader
        self._ahead = ahead
        self._memory = loader.memory
        self._flights = loader.flights
        self._bs = loader.block_size

    def fetch_on_open(self, ref: ObjectRef) -> None:
        """Start fetching a one-block object now: its first read will want all of it.

        Best effort, in the read-ahead nursery and within the global read-ahead
        budget; a block held in memory or on disk, or already in flight, is left alone.
        """
        nursery = self._ahead.nursery
        if nursery is None or not ref.etag or block_count(ref.size, self._bs) != 1:
            return
        if self._ahead.full:
            return
        key = self._loader.key(ref, 0)
        if self._memory.contains(key) or self._loader.on_disk(key):
            return  # a disk hit is read in place by the read itself (often with no thread hop)
        flight = self._flights.claim(key)
        if flight is None:
            return
        self._ahead.take(1)
        try:
            nursery.start_soon(self._fetch_on_open_task, ref, flight)
        except RuntimeError:  # the nursery is closing
            self._ahead.release(1)
            flight.abandon()

    async def _fetch_on_open_task(self, ref: ObjectRef, flight: Flight[bytes]) -> None:
        try:
            await self._loader.load(ref, [(0, flight)], prefetch=True, to_memory=True)
        except Exception as exc:  # best effort: the read fetches it itself
            log.debug("fetch on open of %s failed: %r", ref.key, exc)
        finally:
            self._ahead.release(1)

    async def prefetch_whole(self, ref: ObjectRef) -> int:
        """Fetch every block of ``ref`` not cached yet; returns bytes fetched from the UFS.

        Blocks go to the disk tier when there is one (warming a dataset larger
        than RAM must not flush the hot memory tier), else to memory. Runs of
        several missing blocks are read through one streaming GET; with a cache
        group, ``PEER_BATCH_BLOCKS`` at a time from their owners (whose misses the
        loader fetches with ranged GETs). Errors propagate to the caller.
        """
        to_memory = self._loader.disk is None
        missing = [
            index
            for index in range(block_count(ref.size, self._bs))
            if not self._loader.is_cached(self._loader.key(ref, index))
        ]
        fetched = 0
        peers = self._loader.has_peers
        longest = PEER_BATCH_BLOCKS if peers else len(missing) or 1
        for run in consecutive_runs(missing, max_len=longest):
            if len(run) > 1 and not peers:
                fetched += await self._loader.stream_run(ref, run, to_memory)
                continue
            claimed: Claimed = []
            for index in run:
                flight = self._flights.claim(self._loader.key(ref, index))
                if flight is not None:
                    claimed.append((index, flight))
            if claimed:
                loaded = await self._loader.load(ref, claimed, prefetch=True, to_memory=to_memory)
                fetched += sum(len(d) for d in loaded.values())
        return fetched

    async def warm_in_group(self, ref: ObjectRef) -> tuple[int, int]:
        """Have every block of ``ref`` held by its owner in the cache group, no copy
        here: warming a dataset costs the group one origin read and no per-node
        copies. A block no owner took (its owner down) is warmed here instead.
        Returns (bytes the owners fetched from the UFS, bytes fetched here).
        """
        by_owner = 0
        missing: list[int] = []
        indexes = list(range(block_count(ref.size, self._bs)))
        for start in range(0, len(indexes), PEER_BATCH_BLOCKS):
            batch = indexes[start : start + PEER_BATCH_BLOCKS]
            placed = await self._loader.fill_group(ref, batch)
            for index, where in zip(batch, placed, strict=True):
                if where is None and not self._loader.is_cached(self._loader.key(ref, index)):
                    missing.append(index)
                elif where == "origin":
                    by_owner += self._loader.length(ref, index)
        here = 0
        for run in consecutive_runs(missing, max_len=len(missing) or 1):
            here += await self._loader.stream_run(ref, run, self._loader.disk is None)
        return by_owner, here
