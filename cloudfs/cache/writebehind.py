"""DiskWriteBehind: block writes to the disk tier that nobody waits for, within a bound.

A reader whose block came from the UFS has its bytes; writing them to the disk
tier (a worker-thread hop, a file written and renamed) is for later readers.
``submit`` hands the blocks to a task in the owner's nursery and returns at
once, unless ``max_pending`` blocks are already waiting to be written: then it
waits for room (so memory held by pending writes stays bounded, and a disk
slower than the network slows fetching rather than growing the queue).

Blocks waiting to be written stay readable through ``pending(key)``, so a block
that has already left the memory tier is not fetched again meanwhile. Writes
run under their own ``CapacityLimiter``: they never take a thread a disk read
or a UFS fetch is waiting for. ``BlockTier.put`` logs and declines on I/O
errors; anything else a write raises is logged here, never raised to a reader.

Before ``start`` (or after the nursery closes) ``submit`` writes inline.
Trio thread only.
"""

from __future__ import annotations

import logging

import trio

from cloudfs.cache.interface import BlockTier

log = logging.getLogger(__name__)

MAX_PENDING_BLOCKS = 8
WRITE_THREADS = 4


class DiskWriteBehind:
    def __init__(
        self,
        disk: BlockTier,
        *,
        max_pending: int = MAX_PENDING_BLOCKS,
        limiter: trio.CapacityLimiter | None = None,
    ) -> None:
        if max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        self._disk = disk
        self._limiter = limiter or trio.CapacityLimiter(WRITE_THREADS)
        self._room = trio.Semaphore(max_pending)
        self._pending: dict[str, bytes] = {}
        self._nursery: trio.Nursery | None = None
        self._idle = trio.Event()
        self._idle.set()

    def start(self, nursery: trio.Nursery) -> None:
        """Run writes in ``nursery`` from now on."""
        self._nursery = nursery

    def stop(self) -> None:
        """Write inline from now on (writes already queued still run in the nursery)."""
        self._nursery = None

    @property
    def pending_blocks(self) -> int:
        return len(self._pending)

    def pending(self, key: str) -> bytes | None:
        """The bytes of ``key`` if a write of it is queued or running."""
        return self._pending.get(key)

    async def submit(self, keyed: list[tuple[str, bytes]]) -> None:
        """Write ``keyed`` (key, block) pairs to the disk tier, behind the caller's back."""
        for key, data in keyed:
            if self._nursery is None:
                await self._write(key, data)
                continue
            await self._room.acquire()
            nursery = self._nursery
            if nursery is None:  # stopped while we waited for room
                self._room.release()
                await self._write(key, data)
                continue
            self._pending[key] = data
            self._idle = trio.Event() if self._idle.is_set() else self._idle
            try:
                nursery.start_soon(self._write_behind, key, data)
            except RuntimeError:  # the nursery is closing
                self._finish(key)
                await self._write(key, data)

    async def drain(self) -> None:
        """Wait until every queued write has finished (tests, warm-up)."""
        while self._pending:
            await self._idle.wait()

    async def _write_behind(self, key: str, data: bytes) -> None:
        try:
            await self._write(key, data)
        finally:
            self._finish(key)

    def _finish(self, key: str) -> None:
        self._pending.pop(key, None)
        self._room.release()
        if not self._pending:
            self._idle.set()

    async def _write(self, key: str, data: bytes) -> None:
        try:
            await trio.to_thread.run_sync(self._disk.put, key, data, limiter=self._limiter)
        except Exception as exc:  # BlockTier.put declines I/O errors itself; anything else
            log.warning("disk cache: writing block %s failed: %r", key, exc)
