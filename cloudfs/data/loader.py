"""BlockLoader: moves blocks from the disk tier or the UFS into the cache tiers.

The mechanics under ``ObjectReader`` (which decides *what* to load): the
caller first claims a ``Flight`` per block in the shared ``SingleFlight``
table, synchronously, so nobody else fetches the same block; the loader then
fills the claimed blocks -- disk tier first (``DiskReads.blocks``: one
worker-thread hop for the whole batch), then the UFS with one ranged GET per
run of consecutive missing blocks (BASELINE.md: few large requests) -- puts
them in the tiers and finishes every flight, whatever happens:

* success: ``resolve`` (waiters get the bytes);
* an error from the store (an ``FsError``, after the store's own bounded
  retries), on a foreground load or a prefetch: ``fail`` (every reader waiting
  then gets it unchanged, as its own fetch would have; a retry would cost the
  whole round of timeouts again);
* anything else, or cancellation: ``abandon`` (waiters retry the fetch
  themselves). A later read, after the flight is gone, fetches again.

Every blocking call runs in ``trio.to_thread.run_sync`` under a limiter, one
per kind of work so that none waits behind another: the injected one for the
store (GETs), ``disk_limiter`` for disk-tier reads (``DiskReads``, in
``disk_reads.py``: a disk hit never queues behind prefetch GETs), and the
write-behind's own for disk-tier writes.

Disk writes of blocks fetched for readers go through ``DiskWriteBehind``: the
leader of a fetch has its bytes (and has handed them to its waiters) before
the block file is written. Warm-up (``to_memory=False``) writes inline, so a
warmed block is on disk when warm-up reports it.

With a cache group (``peers``, a ``PeerTier``), every block of a run is
first asked of its owner in the group, all at once, in the same thread hop
as the GET; only the blocks no peer delivered are fetched from the UFS, one
ranged GET per run of them. Blocks from a peer go into the tiers exactly as
fetched ones do.

Disk hits of a read are served by ``disk_reads`` (``DiskReads.read_nowait``,
``read_ranges``): only the bytes the read wants. A sequential stream's body
is read with ``readinto`` into one buffer per block (``read_block``, with
``body.py``), not assembled from many small ``bytes``.

Trio thread only; not thread-safe itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

import trio  # trio 0.22 ships no py.typed

from cloudfs.cache.interface import BlockAsk, BlockTier, PeerTier
from cloudfs.cache.singleflight import Flight, SingleFlight
from cloudfs.cache.writebehind import WRITE_THREADS, DiskWriteBehind
from cloudfs.data.blocks import ObjectRef, block_key, block_length, block_span, consecutive_runs
from cloudfs.data.body import close_quietly, read_exact
from cloudfs.data.disk_reads import DiskReads
from cloudfs.data.ledger import PrefetchLedger
from cloudfs.errors import FsError, RemoteIOError
from cloudfs.lib import gil_free
from cloudfs.metrics import Metrics
from cloudfs.ufs.interface import ObjectStore

Claimed = list[tuple[int, Flight[bytes]]]

# Block keys remembered (sha256 of store, key, ETag, block size, index: ~2 us each).
KEYS_REMEMBERED = 65_536


class BlockLoader:
    def __init__(
        self,
        store: ObjectStore,
        memory: BlockTier,
        disk: BlockTier | None,
        block_size: int,
        metrics: Metrics,
        store_id: str,
        limiter: trio.CapacityLimiter,
        ledger: PrefetchLedger,
        *,
        disk_limiter: trio.CapacityLimiter | None = None,
        peers: PeerTier | None = None,
    ) -> None:
        self.memory = memory
        self.ledger = ledger
        self.disk = disk
        self.flights: SingleFlight[str, bytes] = SingleFlight()
        self._write_limiter = trio.CapacityLimiter(WRITE_THREADS)
        self.write_behind = (
            DiskWriteBehind(disk, limiter=self._write_limiter) if disk is not None else None
        )
        self._store = store
        self._bs = block_size
        self._metrics = metrics
        self._store_id = store_id
        self._limiter = limiter
        self._peers = peers
        self._keys: dict[tuple[ObjectRef, int], str] = {}
        self.disk_reads = DiskReads(memory, disk, block_size, self.key, disk_limiter)

    @property
    def block_size(self) -> int:
        return self._bs

    @property
    def has_peers(self) -> bool:
        """Whether misses go to a cache group first (then no streaming GETs: see reader)."""
        return self._peers is not None

    def key(self, ref: ObjectRef, index: int) -> str:
        """Block ``index``'s cache key, hashed once per block of an object in use."""
        keys = self._keys
        found = keys.get((ref, index))
        if found is None:
            if len(keys) >= KEYS_REMEMBERED:
                keys.clear()  # cheap to rebuild: one hash per block
            found = keys[(ref, index)] = block_key(self._store_id, ref, index, self._bs)
        return found

    def length(self, ref: ObjectRef, index: int) -> int:
        return block_length(index, ref.size, self._bs)

    def is_cached(self, key: str) -> bool:
        """Held by a tier or being fetched (counts no hit or miss)."""
        if self.memory.contains(key) or key in self.flights or self.pending(key) is not None:
            return True
        return self.disk is not None and self.disk.contains(key)

    def pending(self, key: str) -> bytes | None:
        """A block fetched and waiting for its disk write (see ``DiskWriteBehind``)."""
        return None if self.write_behind is None else self.write_behind.pending(key)

    def on_disk(self, key: str) -> bool:
        """Whether the disk tier holds ``key`` (an index check; counts nothing)."""
        return self.disk is not None and self.disk.contains(key)

    async def load(
        self,
        ref: ObjectRef,
        claimed: Claimed,
        *,
        prefetch: bool,
        to_memory: bool,
        on_resolved: Callable[[int], None] | None = None,
    ) -> dict[int, bytes]:
        """Fill the claimed blocks from disk or the UFS; finish every flight.

        ``to_memory=False`` (warm-up with a disk tier) leaves the memory tier
        alone. ``on_resolved(n)`` is told as soon as ``n`` more blocks are
        handed over (read-ahead releases its memory budget then, not after the
        disk write). Errors are re-raised after the flights are finished.
        """
        pending = dict(claimed)
        result: dict[int, bytes] = {}
        try:
            for index, data in await self.disk_reads.blocks(ref, sorted(pending)):
                if to_memory:
                    self._remember(self.key(ref, index), data, prefetch)
                pending.pop(index).resolve(data)
                result[index] = data
                if on_resolved is not None:
                    on_resolved(1)
            to_disk_only = not to_memory and self.disk is not None
            for run in consecutive_runs(sorted(pending), max_len=len(pending) or 1):
                keys = [self.key(ref, i) for i in run]
                # Disk only: stored (in the GET's thread hop) before the flights end,
                # else a read arriving in between finds the block in no tier.
                blocks = await self._get_run(ref, run, store_as=keys if to_disk_only else None)
                keyed = list(zip(keys, blocks, strict=True))
                for (key, data), index in zip(keyed, run, strict=True):
                    if not to_disk_only:
                        self._remember(key, data, prefetch)
                    pending.pop(index).resolve(data)
                    result[index] = data
                if on_resolved is not None:
                    on_resolved(len(run))
                if prefetch:
                    self._metrics.prefetch_bytes.inc(sum(len(d) for d in blocks))
                if to_disk_only:
                    continue
                if self.write_behind is not None:
                    await self.write_behind.submit(keyed)  # returns before the write
                else:
                    await self.disk_store(keyed)
        except FsError as exc:  # the store's answer, after its own retries: waiters get it
            for flight in pending.values():
                flight.fail(exc)
            raise
        except BaseException:
            for flight in pending.values():
                flight.abandon()
            raise
        return result

    async def from_disk(self, ref: ObjectRef, claimed: Claimed, *, prefetch: bool) -> Claimed:
        """Resolve the claimed blocks the disk tier holds (copying them to memory).

        Returns the claimed blocks it does not hold, still unresolved.
        """
        found = dict(await self.disk_reads.blocks(ref, [index for index, _ in claimed]))
        rest: Claimed = []
        for index, flight in claimed:
            data = found.get(index)
            if data is None:
                rest.append((index, flight))
                continue
            self._remember(self.key(ref, index), data, prefetch)
            flight.resolve(data)
        return rest

    async def stream_run(self, ref: ObjectRef, run: list[int], to_memory: bool) -> int:
        """Prefetch consecutive blocks through one streaming GET, one block in memory at a time.

        Blocks someone else is fetching meanwhile are read past. Returns the
        bytes stored; errors propagate (flights are abandoned, not failed).
        """
        stream = await self.open_stream(ref, run[0])
        fetched = 0
        buffer = bytearray(self._bs)
        try:
            for index in run:
                flight = self.flights.claim(self.key(ref, index))
                try:
                    data = await self.read_block(stream, ref, index, buffer)
                except BaseException:
                    if flight is not None:
                        flight.abandon()
                    raise
                if flight is not None:
                    await self.deliver(ref, index, data, flight, to_memory=to_memory)
                    fetched += len(data)
        finally:
            await self.close_stream(stream)
        return fetched

    async def open_stream(self, ref: ObjectRef, index: int) -> BinaryIO:
        """A streaming GET of ``ref`` from the start of block ``index`` to its end."""
        start = block_span(index, ref.size, self._bs)[0]
        stream: BinaryIO = await trio.to_thread.run_sync(
            self._store.get_stream, ref.key, start, limiter=self._limiter
        )
        return stream

    async def read_block(
        self, stream: BinaryIO, ref: ObjectRef, index: int, buffer: bytearray | None = None
    ) -> bytes:
        """The next block from ``stream``, which must be at the start of block ``index``.

        ``buffer`` (at least a block long, reused by the caller) receives the
        body through ``readinto``; the block is then copied out once.
        """
        length = self.length(ref, index)
        data: bytes = await trio.to_thread.run_sync(
            read_exact, stream, length, buffer, limiter=self._limiter
        )
        if len(data) != length:
            raise RemoteIOError(f"{ref.key}: stream ended early (object changed?)")
        return data

    async def close_stream(self, stream: BinaryIO) -> None:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(close_quietly, stream, limiter=self._limiter)

    async def deliver(
        self, ref: ObjectRef, index: int, data: bytes, flight: Flight[bytes], *, to_memory: bool
    ) -> None:
        """Hand a prefetched block to its waiters and store it in the tiers (a block
        for the disk tier only is stored first: no read may find it in no tier)."""
        if to_memory or self.disk is None:
            await self.disk_store([self.hand_over(ref, index, data, flight, to_memory=to_memory)])
            return
        await self.disk_store([(self.key(ref, index), data)])
        self.hand_over(ref, index, data, flight, to_memory=False)

    def hand_over(
        self, ref: ObjectRef, index: int, data: bytes, flight: Flight[bytes], *, to_memory: bool
    ) -> tuple[str, bytes]:
        """``deliver`` without the disk write: returns what ``disk_store`` should write."""
        key = self.key(ref, index)
        if to_memory or self.disk is None:
            self._remember(key, data, prefetch=True)
        flight.resolve(data)
        self._metrics.prefetch_bytes.inc(len(data))
        return key, data

    def _remember(self, key: str, data: bytes, prefetch: bool) -> None:
        """Put a block in the memory tier; the ledger follows prefetched ones."""
        self.memory.put(key, data)
        if prefetch:
            self.ledger.fetched(key, len(data))

    async def disk_store(self, keyed: list[tuple[str, bytes]]) -> None:
        disk = self.disk
        if disk is None or not keyed:
            return

        def store() -> None:
            for key, data in keyed:
                disk.put(key, data)

        await trio.to_thread.run_sync(store, limiter=self._write_limiter)

    async def disk_discard(self, keys: list[str]) -> None:
        disk = self.disk
        if disk is None or not keys:
            return

        def discard() -> None:
            for key in keys:
                disk.discard(key)

        await trio.to_thread.run_sync(discard, limiter=self._write_limiter)

    async def fill_group(self, ref: ObjectRef, indexes: list[int]) -> list[str | None]:
        """Have the cache group's owners hold blocks ``indexes`` of ``ref`` (``PeerTier.fill``:
        where each was, "origin" if its owner fetched it now, ``None`` if none took it)."""
        peers = self._peers
        if peers is None or not ref.etag:  # an unversioned block is nobody's to share
            return [None] * len(indexes)
        placed: list[str | None] = await trio.to_thread.run_sync(
            peers.fill, self._asks(ref, indexes), limiter=self._limiter
        )
        return placed

    def _asks(self, ref: ObjectRef, indexes: list[int]) -> list[BlockAsk]:
        """Blocks ``indexes`` of ``ref`` as the cache group is asked for them."""
        bs = self._bs
        return [
            BlockAsk(ref.key, ref.etag, ref.size, bs, i, self.key(ref, i), self.length(ref, i))
            for i in indexes
        ]

    async def _get_run(
        self, ref: ObjectRef, run: list[int], *, store_as: list[str] | None = None
    ) -> list[bytes]:
        """The consecutive blocks ``run``: from the cache group where it has them,
        the rest with one ranged GET per run of them, split into blocks.

        The split copies every block once, with the GIL released (``lib/gil_free``);
        it runs in the worker thread with the GET so the trio loop never waits for it. ``store_as``:
        the blocks' keys, to put them in the disk tier in the same thread hop
        (a prefetch for the disk tier: one hop per file, not two).
        """
        bs = self._bs
        get_range = self._store.get_range
        disk = self.disk if store_as is not None else None
        peers = self._peers if ref.etag else None  # an unversioned block is nobody's to share
        asks = self._asks(ref, run) if peers is not None else []

        def from_store(indexes: list[int]) -> list[bytes]:
            start = block_span(indexes[0], ref.size, bs)[0]
            stop = block_span(indexes[-1], ref.size, bs)[1]
            data = get_range(ref.key, start, stop - start)
            if len(data) != stop - start:
                raise RemoteIOError(
                    f"{ref.key}: got {len(data)} bytes at {start}, expected {stop - start}"
                    " (object changed?)"
                )
            if len(indexes) == 1:
                return [bytes(data)]
            return [
                gil_free.copy(data, i * bs - start, min((i + 1) * bs, stop) - start)
                for i in indexes
            ]

        def fetch() -> list[bytes]:
            got: list[bytes | None] = [None] * len(run) if peers is None else peers.fetch(asks)
            missing = [n for n, block in enumerate(got) if block is None]
            for part in consecutive_runs(missing, max_len=len(missing) or 1):
                fetched = from_store([run[n] for n in part])
                for n, block in zip(part, fetched, strict=True):
                    got[n] = block
            blocks = [block for block in got if block is not None]
            if disk is not None and store_as is not None:
                for key, block in zip(store_as, blocks, strict=True):
                    disk.put(key, block)
            return blocks

        blocks: list[bytes] = await trio.to_thread.run_sync(fetch, limiter=self._limiter)
        return blocks
