"""DiskBlockCache: the local-SSD tier, one checksummed file per block.

Layout: ``<directory>/<key[:2]>/<key>``. Each file is a 16-byte header
(magic ``CFB1``, crc32 of the payload, payload length) followed by the payload.

Why this shape:

* Writes go to a temp file in the same sub-directory and are renamed into
  place, so a reader sees the old file, the new file, or none -- never half of
  one. We do not fsync: after a crash a renamed-but-unflushed file may be empty
  or torn, and the crc32 checked on *every* read turns that (and any bit rot)
  into a miss; the damaged file is deleted and the block is fetched again.
* The LRU index lives in memory and is rebuilt at start-up by scanning the
  directory (oldest mtime first), so a remount starts warm. Headers are not
  read during the scan (start-up stays O(files)); damage is found on first use.
  Leftover ``*.tmp`` files from a crash are removed by the scan.
* Capacity counts bytes on disk (header included). Least-recently-used files
  are deleted to make room; a block bigger than the capacity is declined.

Thread-safe: the index is guarded by one lock, file reads and writes happen
outside it. The constructor scans the directory, so build it before starting
trio or through ``trio.to_thread.run_sync``. One directory belongs to one
``DiskBlockCache`` at a time (the index is not shared between processes).

I/O errors (disk full, EIO) never escape: ``put`` logs and declines the block,
``get`` logs and reports a miss.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import threading
import uuid
import zlib
from collections import OrderedDict

from cloudfs.cache.counters import TierCounters
from cloudfs.cache.interface import TierStats
from cloudfs.metrics import Metrics

log = logging.getLogger(__name__)

_MAGIC = b"CFB1"
_HEADER = struct.Struct(">4sIQ")  # magic, crc32, payload length
HEADER_SIZE = _HEADER.size
_TMP_SUFFIX = ".tmp"
_KEY_RE = re.compile(r"[0-9A-Za-z_-]{2,200}")


class DiskBlockCache:
    def __init__(
        self, directory: str, capacity_bytes: int, metrics: Metrics, tier: str = "disk"
    ) -> None:
        if capacity_bytes < 0:
            raise ValueError("capacity_bytes must be >= 0")
        self._dir = directory
        self._tier = tier
        self._capacity = capacity_bytes
        self._lock = threading.Lock()
        self._index: OrderedDict[str, int] = OrderedDict()  # key -> file size; LRU first
        self._counters = TierCounters(metrics, tier, capacity_bytes)
        os.makedirs(directory, exist_ok=True)
        self._rebuild_index()

    @property
    def tier(self) -> str:
        return self._tier

    @property
    def directory(self) -> str:
        return self._dir

    def path_of(self, key: str) -> str:
        """Where the block ``key`` lives on disk (tests corrupt it on purpose)."""
        _check_key(key)
        return os.path.join(self._dir, key[:2], key)

    def get(self, key: str, size_hint: int = 0) -> bytes | None:
        path = self.path_of(key)
        with self._lock:
            if key not in self._index:
                self._counters.miss(size_hint)
                return None
            self._index.move_to_end(key)
        data = _read_verified(path)
        with self._lock:
            if data is None:
                self._drop(key, evicted=False)
                self._counters.miss(size_hint)
                return None
            self._counters.hit(len(data))
            return data

    def put(self, key: str, data: bytes) -> None:
        path = self.path_of(key)
        size = HEADER_SIZE + len(data)
        if size > self._capacity:
            return
        tmp = f"{path}.{uuid.uuid4().hex}{_TMP_SUFFIX}"
        try:
            _write_block(path, tmp, data)
        except OSError as exc:
            log.warning("disk cache: cannot write block %s: %s", key, exc)
            _unlink_quietly(tmp)
            return
        with self._lock:
            old = self._index.pop(key, None)
            if old is not None:
                self._counters.removed(old, evicted=False)
            self._make_room(size)
            self._index[key] = size
            self._counters.added(size)

    def discard(self, key: str) -> None:
        self.path_of(key)  # validates the key
        with self._lock:
            self._drop(key, evicted=False)

    def contains(self, key: str) -> bool:
        with self._lock:
            return key in self._index

    def stats(self) -> TierStats:
        with self._lock:
            return self._counters.snapshot()

    # -- internals (callers hold self._lock unless noted) --------------------

    def _make_room(self, size: int) -> None:
        while self._index and self._counters.bytes + size > self._capacity:
            victim = next(iter(self._index))
            self._drop(victim, evicted=True)

    def _drop(self, key: str, *, evicted: bool) -> None:
        size = self._index.pop(key, None)
        if size is None:
            return
        self._counters.removed(size, evicted=evicted)
        _unlink_quietly(os.path.join(self._dir, key[:2], key))

    def _rebuild_index(self) -> None:
        """Scan the directory (constructor only, no lock needed yet)."""
        found: list[tuple[int, str, int]] = []
        with os.scandir(self._dir) as subdirs:
            for sub in subdirs:
                if len(sub.name) != 2 or not sub.is_dir(follow_symlinks=False):
                    continue
                with os.scandir(sub.path) as files:
                    for entry in files:
                        self._scan_entry(sub.name, entry, found)
        found.sort()
        for _, key, size in found:
            self._index[key] = size
            self._counters.added(size)
        with self._lock:
            self._make_room(0)

    @staticmethod
    def _scan_entry(
        prefix: str, entry: os.DirEntry[str], found: list[tuple[int, str, int]]
    ) -> None:
        if entry.name.endswith(_TMP_SUFFIX):
            _unlink_quietly(entry.path)
            return
        if not _KEY_RE.fullmatch(entry.name) or entry.name[:2] != prefix:
            return
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            return
        if st.st_size < HEADER_SIZE:
            _unlink_quietly(entry.path)
            return
        found.append((st.st_mtime_ns, entry.name, st.st_size))


def _check_key(key: str) -> None:
    if not _KEY_RE.fullmatch(key):
        raise ValueError(f"invalid block key {key!r}")


def _write_block(path: str, tmp: str, data: bytes) -> None:
    header = _HEADER.pack(_MAGIC, zlib.crc32(data), len(data))
    try:
        f = open(tmp, "wb")  # noqa: SIM115 - retried below after creating the directory
    except FileNotFoundError:
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        f = open(tmp, "wb")  # noqa: SIM115
    with f:
        f.write(header)
        f.write(data)
    os.replace(tmp, path)


def _read_verified(path: str) -> bytes | None:
    """The payload of a block file, or None if it is missing, torn or corrupt."""
    try:
        with open(path, "rb") as f:
            header = f.read(HEADER_SIZE)
            if len(header) != HEADER_SIZE:
                _report_corrupt(path, "short header")
                return None
            magic, crc, length = _HEADER.unpack(header)
            if magic != _MAGIC:
                _report_corrupt(path, "bad magic")
                return None
            if os.fstat(f.fileno()).st_size != HEADER_SIZE + length:
                _report_corrupt(path, "wrong length")
                return None
            data = f.read(length)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("disk cache: cannot read %s: %s", path, exc)
        return None
    if len(data) != length or zlib.crc32(data) != crc:
        _report_corrupt(path, "checksum mismatch")
        return None
    return data


def _report_corrupt(path: str, why: str) -> None:
    log.warning("disk cache: dropping damaged block file %s (%s)", path, why)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("disk cache: cannot remove %s: %s", path, exc)
