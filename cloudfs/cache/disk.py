"""DiskBlockCache: the local-SSD tier, one checksummed file per block (``blockfile.py``).

Layout: ``<directory>/<key[:2]>/<key>``, the block files spread over one or
more directories (one per SSD) by a hash of the key; ``capacity_bytes`` is
split evenly between them (``disk_shard.py``: a directory, its index and its scan).

Why this shape:

* The crc32 of ``blockfile`` is checked the first time this process reads a
  block file (a block it wrote itself was checked as it was written); after
  that the file is trusted while its stamp (inode, size, mtime, ctime) is
  unchanged, and ``read_range`` serves any sub-range with one ``pread``, no
  whole-block read. Up to ``OPEN_FILES`` recently read block files stay open,
  and ``read_range_nowait`` reads them with ``RWF_NOWAIT`` (nothing but a
  copy from the page cache, or a refusal): the trio thread may call it, and a
  disk hit whose bytes the kernel still caches costs no thread hop. A torn,
  truncated, rotten or changed-and-damaged file is a miss; the file is
  deleted and the block fetched again.
* The index lives in memory and is rebuilt at start-up by scanning the
  directories (oldest mtime first), so a remount starts warm. Headers are not
  read during the scan (start-up stays O(files)); damage is found on first use.
  Leftover ``*.tmp`` files from a crash, and blocks in a directory that no
  longer owns their hash (the directory list changed), are removed.
* Capacity counts bytes on disk (header included). Which block leaves to make
  room is the least recently used one; whether a new block may push it out is
  the ``Admission`` policy's call (``admission.py``: TinyLFU by default, so a
  dataset scanned every epoch keeps the part that fits instead of thrashing).
  Only ``get`` counts as an access (a miss and the put that follows it are one
  request for the block), so a block put without ever being read, as warm-up
  does, gets in only where it displaces nothing that was read.
* ``min_free_ratio`` is a floor of free space on each directory's filesystem:
  a put that would go below it first evicts our own blocks, and is declined if
  that is not enough (the disk is full of other people's files).
* When the training job announces its read order (``set_ranker``: a
  ``belady.Ranker`` says when each block is next read), eviction follows
  Belady's rule instead (``belady.py``): the victim is the block read
  farthest in the future, and a new block gets in only if it is read strictly
  sooner than the victim -- a cache smaller than the dataset keeps the part
  that fits, every epoch, whatever the shuffle. Blocks no announced read
  needs leave first, in LRU order, and between two of those the ``Admission``
  policy decides as above. The ranker owns the ranks: a read does not change
  them, and ``reranked`` says whose changed (O(log n) each, no I/O, safe on
  the trio thread). ``set_ranker(None)`` is LRU and admission again.

Thread-safe: the index is guarded by one lock, file reads and writes happen
outside it. The constructor scans the directories, so build it before starting
trio or through ``trio.to_thread.run_sync``. A directory belongs to one
``DiskBlockCache`` at a time (the index is not shared between processes).

I/O errors (disk full, EIO) never escape: ``put`` logs and declines the block,
``get`` logs and reports a miss.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

from cloudfs.cache.admission import Admission, AdmitAll
from cloudfs.cache.belady import NOT_NEEDED, Ranker, RankIndex, Victim
from cloudfs.cache.blockfile import (
    HEADER_SIZE,
    TMP_SUFFIX,
    Stamp,
    check_key,
    open_stamped,
    pread_nowait,
    read_trusted,
    read_verified,
    unlink_quietly,
    write_block,
)
from cloudfs.cache.counters import TierCounters
from cloudfs.cache.disk_shard import Shard, scan, shard_for
from cloudfs.cache.interface import TierStats
from cloudfs.metrics import Metrics

log = logging.getLogger(__name__)

__all__ = ["HEADER_SIZE", "DiskBlockCache"]

OPEN_FILES = 256  # block files kept open for read_range_nowait


class DiskBlockCache:
    def __init__(
        self,
        directories: Sequence[str],
        capacity_bytes: int,
        metrics: Metrics,
        tier: str = "disk",
        *,
        admission: Admission | None = None,
        min_free_ratio: float = 0.0,
        statvfs: Callable[[str], os.statvfs_result] = os.statvfs,
    ) -> None:
        if capacity_bytes < 0:
            raise ValueError("capacity_bytes must be >= 0")
        if not directories:
            raise ValueError("at least one cache directory is needed")
        if not 0.0 <= min_free_ratio < 1.0:
            raise ValueError("min_free_ratio must be in [0, 1)")
        share = capacity_bytes // len(directories)
        self._shards = [Shard(d, share) for d in directories]
        self._tier = tier
        self._admission = admission or AdmitAll()
        self._min_free = min_free_ratio
        self._statvfs = statvfs
        self._ranker: Ranker | None = None
        self._lock = threading.Lock()
        self._verified: dict[str, Stamp] = {}  # blocks checked in this process, and their files
        self._open: OrderedDict[str, tuple[int, Stamp]] = OrderedDict()  # LRU of open files
        weakref.finalize(self, _close_all, self._open)
        self._counters = TierCounters(metrics, tier, share * len(directories))
        for shard in self._shards:
            os.makedirs(shard.directory, exist_ok=True)
            self._rebuild_index(shard)

    @property
    def tier(self) -> str:
        return self._tier

    @property
    def directories(self) -> list[str]:
        return [shard.directory for shard in self._shards]

    def set_ranker(self, ranker: Ranker | None) -> None:
        """Evict by ``ranker``'s announced future from now on (Belady), or, with None,
        by LRU and the admission policy again. O(n) in the cached blocks."""
        with self._lock:
            self._ranker = ranker
            for shard in self._shards:
                shard.ranked = None if ranker is None else RankIndex(ranker, shard.index)

    def reranked(self, keys: Iterable[str]) -> None:
        """The ranker's ranks of ``keys`` changed: re-file them. Keys not cached are
        ignored. O(k log n), no I/O: safe on the trio thread."""
        with self._lock:
            if self._ranker is None:
                return
            for key in keys:
                ranked = self._shard(key).ranked
                if ranked is not None:
                    ranked.rerank(key)

    def path_of(self, key: str) -> str:
        """Where the block ``key`` lives on disk (tests corrupt it on purpose)."""
        check_key(key)
        return os.path.join(self._shard(key).directory, key[:2], key)

    def get(self, key: str, size_hint: int = 0) -> bytes | None:
        return self._read(key, 0, None, size_hint)

    def read_range(self, key: str, offset: int, length: int, size_hint: int = 0) -> bytes | None:
        """Bytes ``[offset, offset + length)`` of the block, short at its end; None: a miss.

        A block checked before in this process is read with one ``pread`` of the
        range; otherwise the whole file is checked first (and trusted from then on).
        """
        if offset < 0 or length < 0:
            raise ValueError(f"bad range {offset}+{length}")
        return self._read(key, offset, length, size_hint)

    def read_range_nowait(self, key: str, offset: int, length: int) -> bytes | None:
        """``read_range`` if it needs no wait for the disk: an open, checked block file
        whose bytes are in the page cache. None otherwise, counting nothing (then
        call ``read_range`` in a worker thread). Safe on the trio thread."""
        shard = self._shard(key)
        with self._lock:  # held across the read: eviction must not close the file under it
            entry = self._open.get(key)
            if entry is None or self._verified.get(key) != entry[1] or key not in shard.index:
                return None
            data = pread_nowait(entry[0], entry[1], offset, length)
            if data is None:
                return None
            self._open.move_to_end(key)
            shard.touch(key)
            self._admission.record(key)
            self._counters.hit(len(data))
            return data

    def _keep_open(self, key: str, path: str, stamp: Stamp) -> None:
        """Open a checked block file for ``read_range_nowait`` (no lock held; worker thread)."""
        with self._lock:
            entry = self._open.get(key)
            if entry is not None and entry[1] == stamp:
                return
        fd = open_stamped(path, stamp)
        if fd is None:
            return
        with self._lock:
            if self._verified.get(key) != stamp:
                os.close(fd)  # rewritten or dropped meanwhile
                return
            old = self._open.pop(key, None)
            if old is not None:
                os.close(old[0])
            self._open[key] = (fd, stamp)
            while len(self._open) > OPEN_FILES:
                os.close(self._open.popitem(last=False)[1][0])

    def _read(self, key: str, offset: int, length: int | None, size_hint: int) -> bytes | None:
        path = self.path_of(key)
        shard = self._shard(key)
        with self._lock:
            self._admission.record(key)
            size = shard.index.get(key)
            if size is None:
                self._counters.miss(size_hint)
                return None
            shard.touch(key)
            stamp = self._verified.get(key)
        if length is None:
            length = size - HEADER_SIZE - offset
        data = None if stamp is None else read_trusted(path, stamp, offset, length)
        checked = None
        if data is None:
            checked = read_verified(path)
            if checked is not None:
                whole = checked[0]
                exact = offset == 0 and length >= len(whole)
                data = whole if exact else whole[offset : offset + length]
        with self._lock:
            if data is None:
                self._drop(shard, key, evicted=False)
                self._counters.miss(size_hint)
                return None
            if checked is not None and key in shard.index:
                self._verified[key] = stamp = checked[1]
            self._counters.hit(len(data))
        if stamp is not None:
            self._keep_open(key, path, stamp)
        return data

    def put(self, key: str, data: bytes) -> None:
        path = self.path_of(key)
        shard = self._shard(key)
        size = HEADER_SIZE + len(data)
        if size > shard.capacity:
            return
        with self._lock:
            if not self._admits(shard, key, size):
                return
            self._make_room(shard, size)  # before writing: the directory never holds more
            shard.reserved += size
        written: Stamp | None = None
        try:
            if self._free_space_for(shard, size):
                written = self._write(key, path, data)
        finally:
            with self._lock:
                shard.reserved -= size
                if written is None:
                    self._verified.pop(key, None)  # the old file may have been replaced
                else:
                    self._verified[key] = written
                    old = shard.index.pop(key, None)
                    if old is not None:
                        shard.bytes -= old
                        self._counters.removed(old, evicted=False)
                    shard.index[key] = size
                    shard.bytes += size
                    if shard.ranked is not None:
                        shard.ranked.add(key)
                    self._counters.added(size)

    def _write(self, key: str, path: str, data: bytes) -> Stamp | None:
        """Write a block file (no lock held); its stamp, or None if the disk refused it."""
        tmp = f"{path}.{uuid.uuid4().hex}{TMP_SUFFIX}"
        try:
            return write_block(path, tmp, data)
        except OSError as exc:
            log.warning("disk cache: cannot write block %s: %s", key, exc)
            unlink_quietly(tmp)
            return None

    def discard(self, key: str) -> None:
        self.path_of(key)  # validates the key
        with self._lock:
            self._drop(self._shard(key), key, evicted=False)

    def contains(self, key: str) -> bool:
        with self._lock:
            return key in self._shard(key).index

    def miss_if_absent(self, key: str, size_hint: int = 0) -> bool:
        """``get``'s miss without I/O (an index check): safe on the trio thread."""
        shard = self._shard(key)
        with self._lock:
            if key in shard.index:
                return False
            self._admission.record(key)
            self._counters.miss(size_hint)
            return True

    def stats(self) -> TierStats:
        with self._lock:
            return self._counters.snapshot()

    # -- internals (callers hold self._lock unless noted) --------------------

    def _shard(self, key: str) -> Shard:
        return shard_for(self._shards, key)

    def _admits(self, shard: Shard, key: str, size: int) -> bool:
        """Whether every block ``key`` would push out of ``shard`` may be pushed out by it."""
        if key in shard.index:
            return True  # a rewrite of a cached block
        need = shard.bytes + shard.reserved + size - shard.capacity
        if shard.ranked is not None:
            return self._ranked_admits(shard, shard.ranked, key, need)
        for victim, victim_size in shard.index.items():
            if need <= 0:
                break
            if not self._admission.admit(key, victim):
                return False
            need -= victim_size
        return True

    def _ranked_admits(self, shard: Shard, ranked: RankIndex, key: str, need: int) -> bool:
        """``_admits`` by Belady: each victim, farthest-needed first, must be needed later
        than ``key``; between two blocks nobody needs, the admission policy decides."""
        rank = self._rank(key)
        taken: list[Victim] = []
        try:
            while need > 0:
                victim = ranked.pop()
                if victim is None:
                    break
                taken.append(victim)
                if not self._may_evict(key, rank, victim):
                    return False
                need -= shard.index[victim.key]
            return True
        finally:
            ranked.unpop(taken)  # _make_room takes the same victims, in the same order

    def _may_evict(self, key: str, rank: int, victim: Victim) -> bool:
        if rank == NOT_NEEDED and victim.rank == NOT_NEEDED:
            return self._admission.admit(key, victim.key)
        return rank < victim.rank

    def _rank(self, key: str) -> int:
        return NOT_NEEDED if self._ranker is None else self._ranker.rank(key)

    def _victim(self, shard: Shard) -> str:
        """The block to evict next from a non-empty shard: the farthest-needed, or the LRU one."""
        if shard.ranked is not None:
            victim = shard.ranked.pop()
            if victim is not None:
                return victim.key
        return next(iter(shard.index))

    def _free_space_for(self, shard: Shard, size: int) -> bool:
        """Keep the filesystem's free-space floor: evict our blocks, or decline (no lock held)."""
        if self._min_free <= 0:
            return True
        try:
            st = self._statvfs(shard.directory)
        except OSError:
            return True
        free = st.f_bavail * st.f_frsize
        deficit = int(self._min_free * st.f_blocks * st.f_frsize) - (free - size)
        with self._lock:
            while deficit > 0 and shard.index:
                victim = self._victim(shard)
                deficit -= shard.index[victim]
                self._drop(shard, victim, evicted=True)
        if deficit > 0:
            log.info("disk cache: %s is below its free-space floor", shard.directory)
            return False
        return True

    def _make_room(self, shard: Shard, size: int) -> None:
        while shard.index and shard.bytes + shard.reserved + size > shard.capacity:
            self._drop(shard, self._victim(shard), evicted=True)

    def _drop(self, shard: Shard, key: str, *, evicted: bool) -> None:
        self._verified.pop(key, None)
        entry = self._open.pop(key, None)
        if entry is not None:
            os.close(entry[0])
        size = shard.index.pop(key, None)
        if size is None:
            return
        if shard.ranked is not None:
            shard.ranked.remove(key)
        shard.bytes -= size
        self._counters.removed(size, evicted=evicted)
        unlink_quietly(os.path.join(shard.directory, key[:2], key))

    def _rebuild_index(self, shard: Shard) -> None:
        """Index what the shard's directory holds (constructor only)."""
        found = scan(shard, self._shards)
        with self._lock:
            for _, key, size in found:
                shard.index[key] = size
                shard.bytes += size
                self._counters.added(size)
            self._make_room(shard, 0)


def _close_all(files: OrderedDict[str, tuple[int, Stamp]]) -> None:
    """Close the block files a garbage-collected cache kept open."""
    for fd, _ in files.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    files.clear()
