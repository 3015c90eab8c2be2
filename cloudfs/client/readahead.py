"""SequentialReads: the reads of one open file, with the blocks after them fetched ahead.

A file read front to back (a shard, a video, a tar of samples) asks for the next
bytes where the last read ended; each such read has the ``window`` bytes after it
fetched in the background (``BlockFetcher.prefetch``), so the next reads find
them cached or on their way, up to ``limit`` (the file's end; a ranged GET's
end at the S3 gateway). A read elsewhere (a Parquet footer, a seek) fetches
nothing ahead: random readers pay no GETs they did not ask for.
"""

from __future__ import annotations

from cloudfs.client.blocks import BlockFetcher
from cloudfs.data.blocks import ObjectRef

AHEAD_BLOCKS = 8  # 32 MiB of 4 MiB blocks: AHEAD_THREADS GETs of AHEAD_RUN_BLOCKS


class SequentialReads:
    def __init__(
        self,
        blocks: BlockFetcher,
        ref: ObjectRef,
        *,
        at: int = 0,
        limit: int | None = None,
        ahead_blocks: int = AHEAD_BLOCKS,
    ) -> None:
        """``at``: where the first sequential read starts; ``limit``: no block from there
        on is fetched ahead (None: the file's end)."""
        self._blocks = blocks
        self._ref = ref
        self._window = ahead_blocks * blocks.block_size
        self._next = at  # where a sequential reader reads next
        self._limit = ref.size if limit is None else min(limit, ref.size)
        self._asked = 0  # fetched ahead up to here

    def __call__(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the file (short at its end)."""
        if start == self._next and self._window:
            self._ask_ahead(end)
        data = self._blocks.read(self._ref, start, end)
        self._next = start + len(data)
        return data

    def _ask_ahead(self, end: int) -> None:
        """Once less than half the window lies asked-for ahead of ``end``, ask for the
        rest of it: several blocks at a time, so they go out in multi-block GETs
        rather than one block per read at the window's edge."""
        if self._asked - end >= self._window // 2:
            return
        stop = min(end + self._window, self._limit)
        self._blocks.prefetch(self._ref, max(end, self._asked), stop)
        self._asked = stop
