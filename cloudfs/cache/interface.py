"""The BlockTier protocol: one level of the block cache (memory, local disk); PeerTier:
the blocks of a cache group (``cloudfs/peers/``), at the end of this file.

A tier maps an opaque block key (``cloudfs.data.blocks.block_key``: a sha256 hex
string derived from the store, object key, ETag, block size and block index) to
the immutable bytes of that block. Because the ETag is part of the key, a tier
never has to invalidate anything when an object changes: stale blocks simply
stop being asked for and age out under LRU.

Every method is synchronous and thread-safe, so the same object can be called
from the trio thread (memory tier: cheap, never does I/O) and from worker
threads (disk tier: file I/O, reached through ``trio.to_thread.run_sync``).

Semantics:

* ``get`` returns the exact bytes last ``put`` under the key, or ``None``. It
  never returns damaged data: a tier that detects corruption drops the block
  and reports a miss. It counts a hit or a miss in the tier's metrics;
  ``size_hint`` (the expected block length) feeds the miss-bytes counter.
* ``put`` is idempotent and best-effort: a tier may decline a block (larger
  than its capacity, disk full) without raising. It may evict other blocks.
* ``read_range`` is ``get`` of a part of the block (short at its end), with
  the same guarantee: the disk tier reads just the range from a block file it
  checked before in this process. Counts a hit (the bytes returned) or a miss.
* ``read_range_nowait`` is ``read_range`` only if it can answer without
  waiting for a disk (memory: always; disk: a block file it keeps open, the
  bytes in the page cache); None counts nothing and means "use read_range".
  Safe to call on the trio thread.
* ``discard`` is idempotent; discarding a missing key is not an error.
* ``contains`` is a cheap index check that counts nothing (used by prefetch
  to skip blocks already held).
* ``miss_if_absent`` is what ``get`` does for a block the tier does not hold
  (count a miss, record the access for admission) without any I/O, so a
  caller can learn about a cold block without a worker-thread hop; it returns
  False, counting nothing, if the block is held (then ``get`` it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class TierStats:
    """A snapshot of one tier's counters (like trio's ``statistics()``)."""

    tier: str
    hits: int
    misses: int
    hit_bytes: int
    miss_bytes: int
    evictions: int
    bytes: int  # payload bytes currently held
    blocks: int  # blocks currently held
    capacity_bytes: int


class BlockTier(Protocol):
    @property
    def tier(self) -> str:
        """The ``tier`` label of this tier's metrics ("memory", "disk")."""
        ...

    def get(self, key: str, size_hint: int = 0) -> bytes | None:
        """The block stored under ``key``, or ``None`` (counted as a miss)."""
        ...

    def read_range(self, key: str, offset: int, length: int, size_hint: int = 0) -> bytes | None:
        """Bytes ``[offset, offset + length)`` of the block under ``key``, or ``None``."""
        ...

    def read_range_nowait(self, key: str, offset: int, length: int) -> bytes | None:
        """``read_range`` if no wait for a disk is needed, else None (nothing counted)."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``, evicting least-recently-used blocks to fit."""
        ...

    def discard(self, key: str) -> None:
        """Forget ``key`` if held. Idempotent."""
        ...

    def contains(self, key: str) -> bool:
        """Whether ``key`` is held right now; counts neither hit nor miss."""
        ...

    def miss_if_absent(self, key: str, size_hint: int = 0) -> bool:
        """Count a miss of ``key`` if it is not held (True); False if it is (nothing counted)."""
        ...

    def stats(self) -> TierStats:
        """Counters and occupancy of this tier."""
        ...


@dataclass(frozen=True, slots=True)
class BlockAsk:
    """One block a reader wants from the peer tier: the object's version and the
    block's place in it, and its cache key (which also places it in the group)."""

    object_key: str
    etag: str
    object_size: int
    block_size: int
    index: int
    cache_key: str
    length: int  # the block's exact length: anything else from a peer is refused


class PeerTier(Protocol):
    """The blocks of a cache group: other processes that hold blocks or fetch them once.

    Unlike ``BlockTier`` it is asked for a batch (a reader's run of missing
    blocks), blocking, from a worker thread, and never raises for a peer's
    failure: every block it could not get is ``None``, and the caller fetches
    those from the UFS itself. It never blocks longer than its per-call
    deadline, and counts its own hits, misses, errors and bytes.
    """

    def fetch(self, asks: Sequence[BlockAsk]) -> list[bytes | None]:
        """Each asked block's bytes (exactly ``length`` of them), or ``None``."""
        ...

    def fill(self, asks: Sequence[BlockAsk]) -> list[str | None]:
        """Have each asked block's owner hold it, sending no bytes back (warm-up
        through the group): "memory" or "disk" where it was held, "origin" where
        the owner fetched it now, ``None`` where none took it."""
        ...
