"""DiskReads: how blocks are read from the disk tier.

A read's disk hit reads only the bytes the request asks for: on the trio
thread when the block file is open and its bytes are in the page cache
(``read_nowait``, ``RWF_NOWAIT``), else with one ``pread`` per block
(``read_ranges``, ``DiskBlockCache.read_range``) in one worker-thread hop on
a limiter of its own, so it never waits behind GETs. A range goes to the
memory tier only when it is the whole block (a small file), so a large file
dropped from the kernel's page cache is served from the block files without
a whole-block read per request, and read-ahead leaves blocks the disk holds
alone. Loads (``BlockLoader.load``, a stream's batch) take whole blocks
(``blocks``) on the same limiter; a cold block costs no thread hop.

A block shorter than the object says (not this version) is discarded and
left out: the caller fetches it. Trio thread only; not thread-safe itself.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from cloudfs.cache.interface import BlockTier
from cloudfs.data.blocks import ObjectRef, block_length

# Threads for disk-tier reads: page-cache hits take microseconds, SSD reads ~0.1 ms.
DISK_READ_THREADS = 8


class DiskReads:
    def __init__(
        self,
        memory: BlockTier,
        disk: BlockTier | None,
        block_size: int,
        key: Callable[[ObjectRef, int], str],
        limiter: trio.CapacityLimiter | None = None,
    ) -> None:
        """``key``: a block's cache key (the loader's, which remembers them);
        ``limiter``: threads reading the disk tier (default ``DISK_READ_THREADS``)."""
        self._memory = memory
        self._disk = disk
        self._bs = block_size
        self._key = key
        self._limiter = limiter or trio.CapacityLimiter(DISK_READ_THREADS)

    def _length(self, ref: ObjectRef, index: int) -> int:
        return block_length(index, ref.size, self._bs)

    def read_nowait(self, ref: ObjectRef, index: int, lo: int, hi: int) -> bytes | None:
        """Bytes ``[lo, hi)`` of block ``index`` if the disk tier has them without
        waiting (an open block file, page-cache bytes): no thread hop. Else None."""
        disk = self._disk
        if disk is None:
            return None
        key = self._key(ref, index)
        data = disk.read_range_nowait(key, lo, hi - lo)
        if data is None or len(data) != hi - lo:
            return None
        if lo == 0 and hi == self._length(ref, index):
            self._memory.put(key, data)
        return data

    async def read_ranges(
        self, ref: ObjectRef, wanted: list[tuple[int, int, int]]
    ) -> dict[int, bytes]:
        """``(index, lo, hi)``: bytes ``[lo, hi)`` of block ``index`` from the disk tier.

        One worker-thread hop (on the disk limiter) for all of them; a block
        the tier no longer holds, or found damaged, is left out (fetch it). A
        range that is the whole block is also put in the memory tier.
        """
        disk = self._disk
        if disk is None or not wanted:
            return {}
        asks = [(i, self._key(ref, i), lo, hi, self._length(ref, i)) for i, lo, hi in wanted]

        def read() -> dict[int, bytes]:
            got = {}
            for index, key, lo, hi, _length in asks:
                data = disk.read_range(key, lo, hi - lo, hi - lo)
                if data is not None and len(data) == hi - lo:
                    got[index] = data
                elif data is not None:  # shorter than the object says: not this version
                    disk.discard(key)
            return got

        found: dict[int, bytes] = await trio.to_thread.run_sync(read, limiter=self._limiter)
        for index, key, lo, hi, length in asks:
            if lo == 0 and hi == length and index in found:
                self._memory.put(key, found[index])
        return found

    async def blocks(self, ref: ObjectRef, indexes: list[int]) -> list[tuple[int, bytes]]:
        """``(index, data)``: the whole blocks ``indexes`` the disk tier holds (the
        caller puts them in the tiers). Counts a miss of each it does not hold."""
        disk = self._disk
        if disk is None or not indexes:
            return []
        wanted = [(index, self._key(ref, index), self._length(ref, index)) for index in indexes]
        # A cold block costs no thread hop: its miss is counted here, on the trio thread.
        wanted = [w for w in wanted if not disk.miss_if_absent(w[1], w[2])]
        if not wanted:
            return []

        def lookup() -> list[tuple[int, bytes]]:
            hits = []
            for index, key, length in wanted:
                data = disk.get(key, length)
                if data is not None and len(data) == length:
                    hits.append((index, data))
                elif data is not None:
                    disk.discard(key)
            return hits

        hits: list[tuple[int, bytes]] = await trio.to_thread.run_sync(lookup, limiter=self._limiter)
        return hits
