"""One epoch's announced order, and where the reader is in it.

The order is kept as two arrays (inode, size: 16 bytes a file) plus an index
sorted by inode for finding a read's position (inode and place packed in 8
bytes, binary search) and a byte a file saying whether it was read: a
million-file epoch costs about 25 MB, not a dict of Python objects, and an
order is at most ``MAX_FILES`` long.

Position: the first file not read yet. Loader workers read out of order (each
takes a batch; ``prefetch_factor`` batches run ahead), so a read anywhere in the
order counts, and the position moves past every run of read files. A file
never read at all (a worker's failure, a sample the job skipped) must not stop
the position for good: files more than ``SKIP_TOLERANCE`` behind the furthest
read are taken as skipped.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

# A file this many places behind the furthest one read counts as skipped.
SKIP_TOLERANCE = 2048
_PLACE_BITS = 23
MAX_FILES = 1 << _PLACE_BITS  # 8,388,608
_PLACE = MAX_FILES - 1


class EpochOrder:
    def __init__(self, inodes: array[int], sizes: array[int]) -> None:
        if len(inodes) != len(sizes):
            raise ValueError("one size per inode")
        if len(inodes) > MAX_FILES:
            raise ValueError(f"an order holds at most {MAX_FILES} files")
        self._inodes = inodes
        self._sizes = sizes
        # (inode << _PLACE_BITS) | place, sorted (tree inodes stay far below 2**41):
        # a read's places by binary search
        self._index = array(
            "Q", sorted((inode << _PLACE_BITS) | i for i, inode in enumerate(inodes))
        )
        self._read = bytearray(len(inodes))
        self.position = 0
        self.furthest = -1  # the furthest place read so far
        self.total_bytes = sum(sizes)

    def __len__(self) -> int:
        return len(self._inodes)

    def inode(self, index: int) -> int:
        return self._inodes[index]

    def size(self, index: int) -> int:
        return self._sizes[index]

    def was_read(self, index: int) -> bool:
        return bool(self._read[index])

    def contains(self, inode: int) -> bool:
        k = bisect_left(self._index, inode << _PLACE_BITS)
        return k < len(self._index) and self._index[k] >> _PLACE_BITS == inode

    def places(self, inode: int) -> list[int]:
        """Every place of ``inode`` in the order, first to last."""
        k = bisect_left(self._index, inode << _PLACE_BITS)
        out = []
        while k < len(self._index) and self._index[k] >> _PLACE_BITS == inode:
            out.append(self._index[k] & _PLACE)
            k += 1
        return out

    def mark_read(self, inode: int) -> int | None:
        """The place of a read of ``inode``: its first occurrence not read yet
        (None if the order does not hold it, or holds it only as read)."""
        for index in self.places(inode):
            if not self._read[index]:
                self._read[index] = 1
                self.furthest = max(self.furthest, index)
                self._advance()
                return index
        return None

    def _advance(self) -> None:
        position = max(self.position, self.furthest - SKIP_TOLERANCE)
        while position < len(self._read) and self._read[position]:
            position += 1
        self.position = position

    @property
    def done(self) -> bool:
        return self.position >= len(self._inodes)
