"""One epoch's announced order, and where the reader is in it.

The order is kept as two arrays (inode, size: 16 bytes a file) plus an index
sorted by inode for finding a read's position (8 more bytes a file, binary
search) and a byte a file saying whether it was read: a million-file epoch
costs about 25 MB, not a dict of Python objects.

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


class EpochOrder:
    def __init__(self, inodes: array[int], sizes: array[int]) -> None:
        if len(inodes) != len(sizes):
            raise ValueError("one size per inode")
        self._inodes = inodes
        self._sizes = sizes
        pairs = sorted(range(len(inodes)), key=inodes.__getitem__)
        self._sorted = array("Q", (inodes[i] for i in pairs))
        self._at = array("Q", pairs)  # self._at[k]: where self._sorted[k] sits in the order
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
        k = bisect_left(self._sorted, inode)
        return k < len(self._sorted) and self._sorted[k] == inode

    def places(self, inode: int) -> list[int]:
        """Every place of ``inode`` in the order."""
        k = bisect_left(self._sorted, inode)
        out = []
        while k < len(self._sorted) and self._sorted[k] == inode:
            out.append(int(self._at[k]))
            k += 1
        return out

    def mark_read(self, inode: int) -> int | None:
        """The place of a read of ``inode``: its first occurrence not read yet
        (None if the order does not hold it, or holds it only as read)."""
        k = bisect_left(self._sorted, inode)
        while k < len(self._sorted) and self._sorted[k] == inode:
            index = self._at[k]
            if not self._read[index]:
                self._read[index] = 1
                self.furthest = max(self.furthest, index)
                self._advance()
                return int(index)
            k += 1
        return None

    def _advance(self) -> None:
        position = max(self.position, self.furthest - SKIP_TOLERANCE)
        while position < len(self._read) and self._read[position]:
            position += 1
        self.position = position

    @property
    def done(self) -> bool:
        return self.position >= len(self._inodes)
