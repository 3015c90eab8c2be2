"""ReadAhead: fetching ahead of sequential readers, within the prefetch budget.

Each open handle passes its ``ReadCursor`` with its reads (see ``prefetch.py``
for the window policy). Batches the cursor asks for are claimed synchronously
(so the foreground read of the same block waits for them instead of fetching
again) and fetched by tasks in the nursery given to ``start``. In-flight
prefetch is bounded per cursor (``readahead_blocks``) and globally
(``max_prefetch_blocks``, default half the memory tier); fetch on open
(``warmup.py``) draws on the same global budget (``take``, ``release``). A
failed prefetch is logged and abandoned, never handed to readers: a reader
waiting on it fetches the block itself, and the store's error (a
``cloudfs.errors.FsError``) reaches it unchanged.

In "stream" mode, an object of at least ``STREAM_MIN_BLOCKS`` blocks is read
ahead through one open GET per cursor (``stream.py``); else, and always in a
cache group (a streaming GET would pass the group by), each batch is fetched
with parallel ranged GETs of ``readahead_part_bytes``. Before ``start`` (or
after ``stop``) nothing is fetched ahead.
"""

from __future__ import annotations

import logging
import weakref

import trio

from cloudfs.cache.singleflight import Flight
from cloudfs.config import CacheConfig
from cloudfs.data.blocks import ObjectRef, block_count, blocks_for_range
from cloudfs.data.loader import BlockLoader, Claimed
from cloudfs.data.prefetch import ReadCursor
from cloudfs.data.stream import SequentialStream

log = logging.getLogger(__name__)

# In "stream" mode, objects of at least this many blocks are read ahead through one open GET.
STREAM_MIN_BLOCKS = 4


class ReadAhead:
    def __init__(
        self, loader: BlockLoader, config: CacheConfig, max_prefetch_blocks: int | None
    ) -> None:
        """``max_prefetch_blocks``: the global budget (default: half the memory tier)."""
        self._loader = loader
        self._memory = loader.memory
        self._flights = loader.flights
        self._bs = loader.block_size
        self._max_window = max(0, config.readahead_blocks)
        self._mode = "ranges" if loader.has_peers else config.readahead_mode
        self._part_blocks = max(1, config.readahead_part_bytes // self._bs)
        self._nursery: trio.Nursery | None = None
        if max_prefetch_blocks is None:
            max_prefetch_blocks = max(self._max_window, config.memory_bytes // self._bs // 2)
        self._max_prefetch = max_prefetch_blocks
        self._inflight = 0
        self._streams: weakref.WeakKeyDictionary[ReadCursor, SequentialStream] = (
            weakref.WeakKeyDictionary()
        )

    def start(self, nursery: trio.Nursery) -> None:
        """Fetch ahead in ``nursery`` (cancel it to stop the fetches)."""
        self._nursery = nursery

    def stop(self) -> None:
        """Fetch no more ahead; running fetches finish or are cancelled by their owner."""
        self._nursery = None

    @property
    def nursery(self) -> trio.Nursery | None:
        """Where fetches ahead run; None before ``start`` and after ``stop``."""
        return self._nursery

    @property
    def inflight(self) -> int:
        """Blocks being fetched ahead right now, all cursors (and fetches on open) together."""
        return self._inflight

    @property
    def full(self) -> bool:
        """Whether the global budget is spent."""
        return self._inflight >= self._max_prefetch

    def take(self, count: int) -> None:
        """Count ``count`` blocks fetched ahead outside a cursor against the budget."""
        self._inflight += count

    def release(self, count: int) -> None:
        """``count`` blocks of ``take`` are done with."""
        self._inflight -= count

    def schedule(self, ref: ObjectRef, cursor: ReadCursor, offset: int, end: int) -> None:
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
                or self._inflight + len(claimed) >= self._max_prefetch
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
        self._inflight += len(claimed)
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
        self._inflight -= count
