"""The directories of ``DiskBlockCache`` (``disk.py``): which one holds a block, what each holds.

A ``Shard`` is one cache directory: its share of the capacity, its index of the
block files in it (key -> file size, least recently used first), and the same
keys in Belady order while a ranker is installed. ``shard_for`` is the
directory a key belongs to, by a hash of the key. ``scan`` lists a directory's
block files at start-up, oldest mtime first, without reading them; on the way
it removes leftover ``*.tmp`` files of a crash and blocks that belong to another
directory (the directory list changed).

A ``Shard`` has no lock of its own: ``DiskBlockCache`` holds its lock around
every change. ``scan`` reads the directory only, no shard state.
"""

from __future__ import annotations

import os
import zlib
from collections import OrderedDict
from collections.abc import Sequence

from cloudfs.cache.belady import RankIndex
from cloudfs.cache.blockfile import HEADER_SIZE, KEY_RE, TMP_SUFFIX, unlink_quietly

Found = list[tuple[int, str, int]]  # (mtime_ns, key, file size)


class Shard:
    """One cache directory: its LRU index (key -> file size, LRU first), its share, and
    its blocks in Belady order while a ranker is installed."""

    __slots__ = ("bytes", "capacity", "directory", "index", "ranked", "reserved")

    def __init__(self, directory: str, capacity: int) -> None:
        self.directory = directory
        self.capacity = capacity
        self.index: OrderedDict[str, int] = OrderedDict()
        self.bytes = 0  # files in the index
        self.reserved = 0  # files being written
        self.ranked: RankIndex | None = None  # the same keys, by rank (set_ranker)

    def touch(self, key: str) -> None:
        """``key`` was read: most recently used."""
        self.index.move_to_end(key)
        if self.ranked is not None:
            self.ranked.touch(key)


def shard_for(shards: Sequence[Shard], key: str) -> Shard:
    """The shard that holds block ``key``."""
    if len(shards) == 1:
        return shards[0]
    return shards[zlib.crc32(key.encode()) % len(shards)]


def scan(shard: Shard, shards: Sequence[Shard]) -> Found:
    """The block files in ``shard``'s directory, oldest first (``shards``: all of them)."""
    found: Found = []
    with os.scandir(shard.directory) as subdirs:
        for sub in subdirs:
            if len(sub.name) != 2 or not sub.is_dir(follow_symlinks=False):
                continue
            with os.scandir(sub.path) as files:
                for entry in files:
                    _scan_entry(shard, shards, sub.name, entry, found)
    found.sort()
    return found


def _scan_entry(
    shard: Shard,
    shards: Sequence[Shard],
    prefix: str,
    entry: os.DirEntry[str],
    found: Found,
) -> None:
    if entry.name.endswith(TMP_SUFFIX):
        unlink_quietly(entry.path)
        return
    if not KEY_RE.fullmatch(entry.name) or entry.name[:2] != prefix:
        return
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return
    if st.st_size < HEADER_SIZE or shard_for(shards, entry.name) is not shard:
        unlink_quietly(entry.path)
        return
    found.append((st.st_mtime_ns, entry.name, st.st_size))
