"""ObjectReader: byte ranges of UFS objects, served through the block tiers.

Read path for each block: memory tier -> a block waiting for its disk write
-> disk tier -> the block's owner in the cache group, if ``peers`` is given
-> UFS (one ranged GET per run of consecutive missing blocks, in
a worker thread; the result fills memory, and disk behind the reader's back;
see ``loader.py``). A disk hit reads only the bytes the request asks for:
on the trio thread when the block file is open and its bytes are in the page
cache (``RWF_NOWAIT``), else with one ``pread`` on a thread limiter of its
own, so it never waits behind GETs. It goes to the memory tier only when it
is the whole block (a small file), so a large file dropped from the
kernel's page cache is served from the block files without a whole-block
read per request, and read-ahead leaves blocks the disk holds alone.
Concurrent misses on one block share one fetch through ``SingleFlight``.
Requests copy only the bytes asked for: blocks are sliced with
``memoryview`` and joined once.

Read-ahead: each open handle passes its ``ReadCursor`` (see ``prefetch.py`` for
the window policy). Batches the cursor asks for are claimed synchronously (so
the foreground read of the same block waits for them instead of fetching
again) and fetched by tasks in a nursery the reader owns. In-flight prefetch is
bounded per cursor (``readahead_blocks``) and globally (``max_prefetch_blocks``,
default half the memory tier). A failed prefetch is logged and abandoned, never
handed to readers: a reader waiting on it fetches the block itself, and the
store's error (a ``cloudfs.errors.FsError``) reaches it unchanged.

Lifetime: either ``async with ObjectReader.running(...) as reader:`` (owns a
nursery; leaving the block cancels outstanding prefetches), or construct it and
call ``reader.start(nursery)`` with a nursery of the composition root. Before
``start`` (or after ``running`` exits) reads still work, only without
read-ahead.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from cloudfs.cache.interface import BlockTier, PeerTier
from cloudfs.cache.singleflight import Flight, FlightAbandoned
from cloudfs.config import CacheConfig
from cloudfs.data.blocks import (
    ObjectRef,
    block_count,
    block_key,
    blocks_for_range,
    consecutive_runs,
)
from cloudfs.data.ledger import PrefetchLedger
from cloudfs.data.loader import BlockLoader, Claimed
from cloudfs.data.prefetch import ReadCursor
from cloudfs.data.stream import SequentialStream
from cloudfs.data.watch import ReadWatch
from cloudfs.errors import InvalidArgument, RemoteIOError
from cloudfs.metrics import Metrics
from cloudfs.ufs.interface import ObjectStore

__all__ = ["ObjectReader", "ReadCursor"]  # ReadCursor lives in prefetch.py; re-exported here

log = logging.getLogger(__name__)


# A read of an object whose fetch failed less than this long ago fails at once.
FAIL_FAST_SECONDS = 2.0
# Leaving ``running`` waits at most this long for queued disk-tier writes.
DRAIN_SECONDS = 10.0
# In "stream" mode, objects of at least this many blocks are read ahead through one open GET.
STREAM_MIN_BLOCKS = 4
# Warm-up with a cache group: blocks asked of the group at once per file (each is a
# whole block in memory until stored; the announced order warms tens of files at once).
PEER_BATCH_BLOCKS = 4


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
        self._recent_failures: dict[str, float] = {}  # object key -> trio time of failure
        self._memory = memory
        self._flights = self._loader.flights
        self._max_window = max(0, config.readahead_blocks)
        self._mode = "ranges" if peers is not None else config.readahead_mode
        self._part_blocks = max(1, config.readahead_part_bytes // self._bs)
        self._nursery: trio.Nursery | None = None
        if max_prefetch_blocks is None:
            max_prefetch_blocks = max(self._max_window, config.memory_bytes // self._bs // 2)
        self._max_prefetch = max_prefetch_blocks
        self._prefetch_inflight = 0
        self._streams: weakref.WeakKeyDictionary[ReadCursor, SequentialStream] = (
            weakref.WeakKeyDictionary()
        )
        self._store_id = store_id
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
                store,
                memory,
                disk,
                config,
                metrics,
                store_id,
                limiter,
                max_prefetch_blocks=max_prefetch_blocks,
                ledger=ledger,
                disk_limiter=disk_limiter,
                peers=peers,
            )
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
        self._nursery = nursery
        if self._loader.write_behind is not None:
            self._loader.write_behind.start(nursery)

    def stop(self) -> None:
        """Schedule no more read-ahead; running tasks finish or are cancelled by their owner."""
        self._nursery = None
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
        return self._prefetch_inflight

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

    def holds(self, ref: ObjectRef, offset: int, size: int) -> bool:
        """Whether a tier holds every block of the range now (in flight does not count)."""
        end = min(offset + size, ref.size)
        for index in blocks_for_range(offset, end, self._bs):
            key = self._loader.key(ref, index)
            if not (
                self._memory.contains(key)
                or self._loader.on_disk(key)
                or self._loader.pending(key) is not None
            ):
                return False
        return True

    def held_bytes(self, ref: ObjectRef, keys: list[str] | None = None) -> int:
        """Bytes of ``ref`` a tier holds now (not in flight); safe in a worker thread.

        ``keys``: its ``block_keys``, if the caller has them already."""
        held = 0
        for index, key in enumerate(self.block_keys(ref) if keys is None else keys):
            if (
                self._memory.contains(key)
                or self._loader.on_disk(key)
                or self._loader.pending(key) is not None
            ):
                held += self._loader.length(ref, index)
        return held

    def block_keys(self, ref: ObjectRef) -> list[str]:
        """The cache keys of every block of ``ref`` (not remembered: safe in bulk, in threads)."""
        return [
            block_key(self._store_id, ref, index, self._bs)
            for index in range(block_count(ref.size, self._bs))
        ]

    async def _read(
        self, ref: ObjectRef, offset: int, size: int, cursor: ReadCursor | None
    ) -> bytes | memoryview:
        if offset < 0 or size < 0:
            raise InvalidArgument(f"bad range offset={offset} size={size}")
        end = min(offset + size, ref.size)
        if end <= offset:
            return b""
        if cursor is not None:
            self._read_ahead(ref, cursor, offset, end)
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

    def fetch_on_open(self, ref: ObjectRef) -> None:
        """Start fetching a one-block object now: its first read will want all of it.

        Best effort, in the read-ahead nursery and within the global read-ahead
        budget; a block held in memory or on disk, or already in flight, is left alone.
        """
        nursery = self._nursery
        if nursery is None or not ref.etag or block_count(ref.size, self._bs) != 1:
            return
        if self._prefetch_inflight >= self._max_prefetch:
            return
        key = self._loader.key(ref, 0)
        if self._memory.contains(key) or self._loader.on_disk(key):
            return  # a disk hit is read in place by the read itself (often with no thread hop)
        flight = self._flights.claim(key)
        if flight is None:
            return
        self._prefetch_inflight += 1
        try:
            nursery.start_soon(self._fetch_on_open_task, ref, flight)
        except RuntimeError:  # the nursery is closing
            self._prefetch_inflight -= 1
            flight.abandon()

    async def _fetch_on_open_task(self, ref: ObjectRef, flight: Flight[bytes]) -> None:
        try:
            await self._loader.load(ref, [(0, flight)], prefetch=True, to_memory=True)
        except Exception as exc:  # best effort: the read fetches it itself
            log.debug("fetch on open of %s failed: %r", ref.key, exc)
        finally:
            self._prefetch_inflight -= 1

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

    @property
    def in_group(self) -> bool:
        """Whether this mount is in a cache group (asks its owners before the UFS)."""
        return self._loader.has_peers

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

    def cached_bytes(self, ref: ObjectRef) -> int:
        """How many bytes of ``ref`` a tier holds or is fetching (counts no hit or miss)."""
        return sum(
            self._loader.length(ref, index)
            for index in range(block_count(ref.size, self._bs))
            if self._loader.is_cached(self._loader.key(ref, index))
        )

    async def evict(self, ref: ObjectRef) -> int:
        """Drop every block of ``ref`` from every tier; returns the bytes that were held."""
        await self.drain_disk_writes()  # else a queued write would put a block back
        dropped = 0
        keys = []
        for index in range(block_count(ref.size, self._bs)):
            key = self._loader.key(ref, index)
            if self._loader.is_cached(key):
                dropped += self._loader.length(ref, index)
            self._memory.discard(key)
            keys.append(key)
        await self._loader.disk_discard(keys)
        return dropped

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
                    data = self._loader.read_disk_nowait(ref, index, lo, hi)
                    if data is not None:  # in the page cache: no thread hop
                        found[index] = (data, lo)
                    else:
                        from_disk.append((index, lo, hi))
                    continue
                mine = self._flights.claim(key)
                assert mine is not None  # nothing awaited since get(): still free
                claimed.append((index, mine))
            if claimed:  # first: it finishes the claimed flights whatever happens
                loaded = await self._load_or_fail_fast(ref, claimed)
                found.update((index, (data, 0)) for index, data in loaded.items())
            retry = []
            if from_disk:
                got = await self._loader.read_disk_ranges(ref, from_disk)
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
                    self._failed(ref)
                    raise
            todo = retry
        for key in keys.values():
            self._ledger.read(key)
        return [found[index] for index, _, _ in spans]

    async def _load_or_fail_fast(self, ref: ObjectRef, claimed: Claimed) -> dict[int, bytes]:
        """Load blocks from the store, unless it just failed for this object.

        After a failed read-ahead the kernel retries the read at once; without
        this, a dead endpoint would cost every read() two full rounds of
        timeouts and retries instead of one.
        """
        failed_at = self._recent_failures.get(ref.key)
        if failed_at is not None and trio.current_time() - failed_at < FAIL_FAST_SECONDS:
            for _index, flight in claimed:
                flight.abandon()
            raise RemoteIOError(f"{ref.key!r}: the object store failed moments ago")
        try:
            loaded = await self._loader.load(ref, claimed, prefetch=False, to_memory=True)
        except RemoteIOError:
            self._failed(ref)
            raise
        self._recent_failures.pop(ref.key, None)
        return loaded

    def _failed(self, ref: ObjectRef) -> None:
        """Reads of ``ref`` fail at once for ``FAIL_FAST_SECONDS`` (see above)."""
        self._recent_failures[ref.key] = trio.current_time()
        if len(self._recent_failures) > 1024:
            self._recent_failures.clear()

    # -- read-ahead -----------------------------------------------------------

    def _read_ahead(self, ref: ObjectRef, cursor: ReadCursor, offset: int, end: int) -> None:
        """Ask the cursor for a batch and claim it now; fetch it in the nursery."""
        ahead = cursor.plan(ref, offset, end, self._bs, self._max_window)
        nursery = self._nursery
        if not ahead or nursery is None:
            return
        claimed: Claimed = []
        streaming = self._mode == "stream" and block_count(ref.size, self._bs) >= STREAM_MIN_BLOCKS
        if streaming and not self._has_stream(cursor, ref):
            # A new sequential run: its GET starts with the blocks this read wants
            # (from offset 0 that is a plain GET, which moto serves far faster than
            # a ranged one, and a round trip less on any store).
            for index in blocks_for_range(offset, end, self._bs):
                flight = self._claim_free(ref, index)
                if flight is not None:
                    claimed.append((index, flight))
        covered = ahead.start
        for index in ahead:
            key = self._loader.key(ref, index)
            if self._memory.contains(key) or key in self._flights or self._loader.on_disk(key):
                covered = index + 1  # a disk hit is read in place: nothing to fetch ahead
                continue
            if (
                cursor.inflight_blocks + len(claimed) >= self._max_window
                or self._prefetch_inflight + len(claimed) >= self._max_prefetch
            ):
                break
            flight = self._flights.claim(key)
            assert flight is not None
            claimed.append((index, flight))
            covered = index + 1
        cursor.issued(covered)
        if not claimed:
            return
        cursor.inflight_blocks += len(claimed)
        self._prefetch_inflight += len(claimed)
        if streaming and self._stream_batch(nursery, ref, cursor, claimed):
            return
        parts = [
            claimed[i : i + self._part_blocks] for i in range(0, len(claimed), self._part_blocks)
        ]
        for n, part in enumerate(parts):  # parallel ranged GETs
            try:
                nursery.start_soon(self._prefetch_task, ref, cursor, part)
            except RuntimeError:  # the nursery is closing
                rest = [item for later in parts[n:] for item in later]
                self._release_budget(cursor, len(rest))
                for _, flight in rest:
                    flight.abandon()
                return

    def _has_stream(self, cursor: ReadCursor, ref: ObjectRef) -> bool:
        stream = self._streams.get(cursor)
        return stream is not None and not stream.closed and stream.ref == ref

    def _claim_free(self, ref: ObjectRef, index: int) -> Flight[bytes] | None:
        """A flight for block ``index`` unless memory holds it or someone fetches it."""
        key = self._loader.key(ref, index)
        if self._memory.contains(key) or self._loader.on_disk(key):
            return None
        return self._flights.claim(key)

    def _stream_batch(
        self, nursery: trio.Nursery, ref: ObjectRef, cursor: ReadCursor, claimed: Claimed
    ) -> bool:
        """Hand a batch to the cursor's open GET (``stream.py``); False: use a ranged GET."""
        stream = self._streams.get(cursor)
        if stream is None or stream.closed or stream.ref != ref:
            stream = SequentialStream(
                self._loader, ref, lambda count: self._release_budget(cursor, count)
            )
            try:
                nursery.start_soon(stream.run)
            except RuntimeError:  # the nursery is closing
                return False
            self._streams[cursor] = stream
        return stream.submit(claimed)

    async def _prefetch_task(self, ref: ObjectRef, cursor: ReadCursor, claimed: Claimed) -> None:
        outstanding = len(claimed)

        def resolved(count: int) -> None:
            nonlocal outstanding
            outstanding -= count
            self._release_budget(cursor, count)

        try:
            await self._loader.load(
                ref, claimed, prefetch=True, to_memory=True, on_resolved=resolved
            )
        except Exception as exc:  # best effort: the foreground read retries
            log.debug("prefetch of %s blocks %s failed: %r", ref.key, [i for i, _ in claimed], exc)
        finally:
            self._release_budget(cursor, outstanding)

    def _release_budget(self, cursor: ReadCursor, count: int) -> None:
        cursor.inflight_blocks -= count
        self._prefetch_inflight -= count
