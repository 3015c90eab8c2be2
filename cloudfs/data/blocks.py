"""Block identity and offset arithmetic.

Files are cut into fixed-size blocks (``CacheConfig.block_size``). Block ``i``
of an object of ``size`` bytes covers ``[i * bs, min((i + 1) * bs, size))``;
the last block may be short, and an empty object has no blocks.

A block's cache key hashes everything that determines its bytes: the store
(so two volumes never share a key by accident), the object key, the ETag
(so a rewritten object never hits stale blocks), the block size (so changing
it after a remount cannot mix layouts) and the index. The key is a sha256 hex
string: fixed length, filesystem-safe, and the same on every node, which lets
peers share blocks.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """One immutable version of a UFS object: what the reader reads."""

    key: str
    etag: str
    size: int

    def __post_init__(self) -> None:
        if self.size < 0:
            raise ValueError(f"negative object size {self.size}")


def block_key(store_id: str, ref: ObjectRef, index: int, block_size: int) -> str:
    """The cache key of block ``index`` of ``ref`` (sha256 hex)."""
    h = hashlib.sha256()
    # Length-prefixed fields: no two different tuples can serialize alike.
    for field in (store_id, ref.key, ref.etag, str(block_size), str(index)):
        raw = field.encode("utf-8", "surrogateescape")
        h.update(len(raw).to_bytes(8, "big"))
        h.update(raw)
    return h.hexdigest()


def block_count(size: int, block_size: int) -> int:
    """How many blocks an object of ``size`` bytes has."""
    return -(-size // block_size)


def block_span(index: int, size: int, block_size: int) -> tuple[int, int]:
    """The byte range ``[start, end)`` of block ``index`` of a ``size``-byte object."""
    start = index * block_size
    return start, min(start + block_size, size)


def block_length(index: int, size: int, block_size: int) -> int:
    start, end = block_span(index, size, block_size)
    return max(0, end - start)


def blocks_for_range(offset: int, end: int, block_size: int) -> range:
    """Indexes of the blocks overlapping ``[offset, end)`` (empty if ``end <= offset``)."""
    if end <= offset:
        return range(0)
    return range(offset // block_size, (end - 1) // block_size + 1)


def consecutive_runs(indexes: list[int], max_len: int) -> list[list[int]]:
    """Split sorted block indexes into runs of consecutive ones, each at most ``max_len``.

    Each run becomes one ranged GET (few large requests, see BASELINE.md).
    """
    runs: list[list[int]] = []
    for index in indexes:
        if runs and runs[-1][-1] + 1 == index and len(runs[-1]) < max_len:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs
