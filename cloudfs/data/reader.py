"""ObjectReader: byte ranges of UFS objects, served through the block tiers.

Read path for each block: memory tier -> a block waiting for its disk write
-> disk tier -> the block's owner in the cache group, if ``peers`` is given
-> UFS (one ranged GET per run of consecutive missing blocks, in
a worker thread; the result fills memory, and disk behind the reader's back;
see ``loader.py``). A disk hit reads only the bytes the request asks for,
in place (``disk_reads.py``). Concurrent misses on one block share one fetch
through ``SingleFlight``. Requests copy only the bytes asked for: blocks are
sliced with ``memoryview`` and joined once.

Around that walk the reader owns one object per concern and delegates to it:
read-ahead for each open handle's ``ReadCursor`` and the prefetch budget
(``readahead.py``), fetch on open and warm-up (``warmup.py``), what the tiers
hold of an object (``holdings.py``), and failing at once where the store
failed for the object moments ago (``failfast.py``).

Lifetime: either ``async with ObjectReader.running(...) as reader:`` (owns a
nursery; leaving the block cancels outstanding prefetches), or construct it and
call ``reader.start(nursery)`` with a nursery of the composition root. Before
``start`` (or after ``running`` exits) reads still work, only without
read-ahead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from cloudfs.cache.interface import BlockTier, PeerTier
from cloudfs.cache.singleflight import Flight, FlightAbandoned
from cloudfs.config import CacheConfig
from cloudfs.data.blocks import ObjectRef, blocks_for_range
from cloudfs.data.failfast import FailFast
from cloudfs.data.holdings import Holdings
from cloudfs.data.ledger import PrefetchLedger
from cloudfs.data.loader import BlockLoader, Claimed
from cloudfs.data.prefetch import ReadCursor
from cloudfs.data.readahead import ReadAhead
from cloudfs.data.warmup import WarmUp
from cloudfs.data.watch import ReadWatch
from cloudfs.errors import InvalidArgument, RemoteIOError
from cloudfs.metrics import Metrics
from cloudfs.ufs.interface import ObjectStore

__all__ = ["ObjectReader", "ReadCursor"]  # ReadCursor lives in prefetch.py; re-exported here

# Leaving ``running`` waits at most this long for queued disk-tier writes.
DRAIN_SECONDS = 10.0


class ObjectReader:
    def __init__(
        self,
        store: ObjectStore,
        memory: BlockTier,
        disk: BlockTier | None,
        config: CacheConfig,
        metrics: Metrics,
        store_id: str,
        limiter: trio.CapacityLimiter,
        *,
        max_prefetch_blocks: int | None = None,
        ledger: PrefetchLedger | None = None,
        disk_limiter: trio.CapacityLimiter | None = None,
        peers: PeerTier | None = None,
    ) -> None:
        """``limiter`` bounds threads doing UFS (and cache group) requests; ``disk_limiter``
        those reading the disk tier (default: a limiter of its own, ``DISK_READ_THREADS``).
        ``peers``: the cache group, asked for every block before the UFS; then blocks
        are fetched per block run, never through a streaming GET (which would pass
        the group by)."""
        if config.block_size <= 0:
            raise ValueError("block_size must be positive")
        self._bs = config.block_size
        self._ledger = ledger or PrefetchLedger(metrics)
        self._loader = BlockLoader(
            store, memory, disk, self._bs, metrics, store_id, limiter, self._ledger,
            disk_limiter=disk_limiter, peers=peers,
        )  # fmt: skip
        self._memory = memory
        self._flights = self._loader.flights
        self._disk_reads = self._loader.disk_reads
        self._ahead = ReadAhead(self._loader, config, max_prefetch_blocks)
        self._warm_up = WarmUp(self._loader, self._ahead)
        self._holdings = Holdings(self._loader, store_id)
        self._fail_fast = FailFast(self._loader)
        self.watch: ReadWatch | None = None  # told of reads that name their inode

    # -- lifetime -------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def running(
        cls,
        store: ObjectStore,
        memory: BlockTier,
        disk: BlockTier | None,
        config: CacheConfig,
        metrics: Metrics,
        store_id: str,
        limiter: trio.CapacityLimiter,
        *,
        max_prefetch_blocks: int | None = None,
        ledger: PrefetchLedger | None = None,
        disk_limiter: trio.CapacityLimiter | None = None,
        peers: PeerTier | None = None,
    ) -> AsyncIterator[ObjectReader]:
        """A reader with its own read-ahead nursery for the duration of the block."""
        async with trio.open_nursery() as nursery:
            reader = cls(
                store, memory, disk, config, metrics, store_id, limiter,
                max_prefetch_blocks=max_prefetch_blocks, ledger=ledger,
                disk_limiter=disk_limiter, peers=peers,
            )  # fmt: skip
            reader.start(nursery)
            try:
                yield reader
            finally:
                reader.stop()
                with trio.move_on_after(DRAIN_SECONDS) as drain:
                    drain.shield = True  # blocks already fetched are worth keeping
                    await reader.drain_disk_writes()
                nursery.cancel_scope.cancel()

    def start(self, nursery: trio.Nursery) -> None:
        """Run read-ahead tasks and disk writes in ``nursery`` (cancel it to stop them)."""
        self._ahead.start(nursery)
        if self._loader.write_behind is not None:
            self._loader.write_behind.start(nursery)

    def stop(self) -> None:
        """Schedule no more read-ahead; running tasks finish or are cancelled by their owner."""
        self._ahead.stop()
        if self._loader.write_behind is not None:
            self._loader.write_behind.stop()

    async def drain_disk_writes(self) -> None:
        """Wait until the blocks fetched so far are written to the disk tier."""
        if self._loader.write_behind is not None:
            await self._loader.write_behind.drain()

    @property
    def block_size(self) -> int:
        return self._bs

    @property
    def prefetch_inflight(self) -> int:
        """Blocks being fetched ahead right now, all cursors together."""
        return self._ahead.inflight

    # -- reads ----------------------------------------------------------------

    async def read(
        self,
        ref: ObjectRef,
        offset: int,
        size: int,
        cursor: ReadCursor | None = None,
        inode: int = 0,
    ) -> bytes | memoryview:
        """Bytes ``[offset, min(offset + size, ref.size))`` of ``ref``.

        Within one block, a view of the cached block (no copy: the kernel's
        128 KiB-1 MiB requests are answered straight from it); across blocks,
        one joined copy.

        Pass the handle's ``cursor`` to get read-ahead for sequential reads.
        Raises the store's ``FsError`` (``NotFound``, ``RemoteIOError``, ...)
        unchanged, ``RemoteIOError`` if the object is shorter than ``ref.size``
        (it changed under us), ``InvalidArgument`` for a negative offset or size.
        A read naming its ``inode`` is reported to ``watch``.
        """
        watch = self.watch
        if inode and watch is not None and watch.active:
            watch.read_started(inode)
            held = self.holds(ref, offset, size)
            started = trio.current_time()
            data = await self._read(ref, offset, size, cursor)
            waited = 0.0 if held else trio.current_time() - started
            eof = offset + len(data) >= ref.size
            watch.read_done(inode, len(data), held, waited, eof=eof)
            return data
        return await self._read(ref, offset, size, cursor)

    async def _read(
        self, ref: ObjectRef, offset: int, size: int, cursor: ReadCursor | None
    ) -> bytes | memoryview:
        if offset < 0 or size < 0:
            raise InvalidArgument(f"bad range offset={offset} size={size}")
        end = min(offset + size, ref.size)
        if end <= offset:
            return b""
        if cursor is not None:
            self._ahead.schedule(ref, cursor, offset, end)
        spans = []  # (block index, [lo, hi) within the block)
        for index in blocks_for_range(offset, end, self._bs):
            start = index * self._bs
            spans.append((index, max(offset, start) - start, min(end, start + self._bs) - start))
        pieces = await self._fetch(ref, spans)
        parts = []
        for (data, base), (_, lo, hi) in zip(pieces, spans, strict=True):
            hi = min(hi, base + len(data))
            if len(spans) == 1 and lo == base and hi - lo == len(data):
                return data  # a whole cached block or an exact disk range: no copy at all
            parts.append(memoryview(data)[lo - base : hi - base])
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)

    async def _fetch(
        self, ref: ObjectRef, spans: list[tuple[int, int, int]]
    ) -> list[tuple[bytes, int]]:
        """For each ``(index, lo, hi)``: ``(data, base)``, ``data`` holding block
        bytes from ``base`` on, ``[lo, hi)`` at least: a whole block (from memory,
        a fetch in flight or a new load; base 0) or the disk tier's range (base lo).
        """
        keys = {index: self._loader.key(ref, index) for index, _, _ in spans}
        ranges = {index: (lo, hi) for index, lo, hi in spans}
        found: dict[int, tuple[bytes, int]] = {}
        disk_failed: set[int] = set()
        todo = list(ranges)
        while todo:
            waits: list[tuple[int, Flight[bytes]]] = []
            claimed: Claimed = []
            from_disk: list[tuple[int, int, int]] = []
            for index in todo:
                key = keys[index]
                flight = self._flights.get(key)
                if flight is not None:  # being fetched: neither a hit nor a miss of memory
                    waits.append((index, flight))
                    continue
                data = self._memory.get(key, self._loader.length(ref, index))
                if data is None:
                    data = self._loader.pending(key)
                if data is not None:
                    found[index] = (data, 0)
                    continue
                if index not in disk_failed and self._loader.on_disk(key):
                    lo, hi = ranges[index]
                    data = self._disk_reads.read_nowait(ref, index, lo, hi)
                    if data is not None:  # in the page cache: no thread hop
                        found[index] = (data, lo)
                    else:
                        from_disk.append((index, lo, hi))
                    continue
                mine = self._flights.claim(key)
                assert mine is not None  # nothing awaited since get(): still free
                claimed.append((index, mine))
            if claimed:  # first: it finishes the claimed flights whatever happens
                loaded = await self._fail_fast.load(ref, claimed)
                found.update((index, (data, 0)) for index, data in loaded.items())
            retry = []
            if from_disk:
                got = await self._disk_reads.read_ranges(ref, from_disk)
                for index, lo, _ in from_disk:
                    if index in got:
                        found[index] = (got[index], lo)
                    else:  # gone or damaged meanwhile: fetch it
                        disk_failed.add(index)
                        retry.append(index)
            for index, flight in waits:
                try:
                    found[index] = (await flight.wait(), 0)
                except FlightAbandoned:  # a prefetch gave up or its leader was cancelled
                    retry.append(index)
                except RemoteIOError:  # the fetch we waited for failed: as if it were ours
                    self._fail_fast.failed(ref)
                    raise
            todo = retry
        for key in keys.values():
            self._ledger.read(key)
        return [found[index] for index, _, _ in spans]

    # -- what the tiers hold (holdings.py) ------------------------------------

    def holds(self, ref: ObjectRef, offset: int, size: int) -> bool:
        """Whether a tier holds every block of the range now (in flight does not count)."""
        return self._holdings.holds(ref, offset, size)

    def held_bytes(self, ref: ObjectRef, keys: list[str] | None = None) -> int:
        """Bytes of ``ref`` a tier holds now (not in flight); safe in a worker thread.
        ``keys``: its ``block_keys``, if the caller has them already."""
        return self._holdings.held_bytes(ref, keys)

    def block_keys(self, ref: ObjectRef) -> list[str]:
        """The cache keys of every block of ``ref`` (not remembered: safe in bulk, in threads)."""
        return self._holdings.block_keys(ref)

    def cached_bytes(self, ref: ObjectRef) -> int:
        """How many bytes of ``ref`` a tier holds or is fetching (counts no hit or miss)."""
        return self._holdings.cached_bytes(ref)

    async def evict(self, ref: ObjectRef) -> int:
        """Drop every block of ``ref`` from every tier; returns the bytes that were held."""
        await self.drain_disk_writes()  # else a queued write would put a block back
        return await self._holdings.evict(ref)

    # -- fetch on open and warm-up (warmup.py) --------------------------------

    def fetch_on_open(self, ref: ObjectRef) -> None:
        """Start fetching a one-block object now (``WarmUp.fetch_on_open``)."""
        self._warm_up.fetch_on_open(ref)

    async def prefetch_whole(self, ref: ObjectRef) -> int:
        """Fetch every block of ``ref`` not cached yet; returns bytes fetched from the UFS
        (``WarmUp.prefetch_whole``). Errors propagate to the caller."""
        return await self._warm_up.prefetch_whole(ref)

    @property
    def in_group(self) -> bool:
        """Whether this mount is in a cache group (asks its owners before the UFS)."""
        return self._loader.has_peers

    async def warm_in_group(self, ref: ObjectRef) -> tuple[int, int]:
        """Have every block of ``ref`` held by its owner in the cache group, no copy
        here (``WarmUp.warm_in_group``). Returns (bytes the owners fetched from the
        UFS, bytes fetched here)."""
        return await self._warm_up.warm_in_group(ref)
