"""ReadCursor: per-handle sequential detection and the read-ahead window.

This is pure policy (no I/O); the reader's ``ReadAhead`` (``readahead.py``)
asks it what to prefetch and does the fetching. The rules, after mountpoint-s3's prefetcher:

* A read is *sequential* if it starts within one block of where the previous
  read ended (the kernel may reorder its async read requests a little), or if
  it is the first read of the handle and starts at offset 0.
* A sequential stream gets a window of blocks to keep fetched ahead of the
  last block read. The window starts at 1 block and doubles every time a new
  batch is issued, up to ``readahead_blocks``.
* A new batch is issued only when less than half the window is still ahead
  (hysteresis): then the whole gap up to the window is fetched as one batch,
  which the reader turns into one ranged GET. So a long sequential read costs
  one GET per ~half-window, not one per block (the moto quirk in BASELINE.md:
  every ranged GET costs time proportional to the object size).
* Any other read is a seek: the window resets to 0 and nothing is prefetched.
  The next sequential read starts again at 1 block.

Blocks ahead of the reader never exceed the window, so in-flight prefetch per
cursor is bounded by ``readahead_blocks``; ``inflight_blocks`` is kept by the
reader to enforce that even after a seek leaves older batches running.
A cursor is cheap, holds no resources and needs no closing; a new object
version (key or ETag) resets it.
"""

from __future__ import annotations

from cloudfs.data.blocks import ObjectRef, block_count


class ReadCursor:
    def __init__(self) -> None:
        self._identity: tuple[str, str] | None = None
        self._next_offset: int | None = None
        self._ahead_until = 0  # block index (exclusive) up to which prefetch was issued
        self.window = 0  # blocks; 0 = not in a sequential stream
        self.inflight_blocks = 0  # prefetch blocks of this cursor not yet finished
        self.sequential_reads = 0
        self.seeks = 0

    @property
    def ahead_until(self) -> int:
        return self._ahead_until

    def plan(
        self, ref: ObjectRef, offset: int, end: int, block_size: int, max_window: int
    ) -> range:
        """Record a read of ``[offset, end)``; return the blocks to fetch ahead (maybe none)."""
        identity = (ref.key, ref.etag)
        if identity != self._identity:
            self._identity = identity
            self._next_offset = None
            self._reset()
        previous = self._next_offset
        if previous is None:
            sequential = offset == 0
        else:
            sequential = previous - block_size <= offset <= previous + block_size
        self._next_offset = end if previous is None or not sequential else max(previous, end)
        if not sequential:
            self.seeks += 0 if previous is None else 1
            self._reset()
            return range(0)
        if max_window <= 0:
            return range(0)
        self.sequential_reads += 1
        nblocks = block_count(ref.size, block_size)
        first_ahead = (end - 1) // block_size + 1
        if self.window == 0:
            self.window = 1
        frontier = max(self._ahead_until, first_ahead)
        still_ahead = frontier - first_ahead
        if still_ahead * 2 >= self.window:
            return range(0)
        stop = min(first_ahead + self.window, nblocks)
        if stop <= frontier:
            return range(0)
        self.window = min(self.window * 2, max_window)
        return range(frontier, stop)

    def issued(self, until: int) -> None:
        """The reader covered blocks up to ``until`` (exclusive) with prefetch or cache."""
        self._ahead_until = max(self._ahead_until, until)

    def _reset(self) -> None:
        self.window = 0
        self._ahead_until = 0
