"""BlockFetcher: byte ranges of one object version, through the node's mount or an
in-process block cache.

The mount's read path is trio (``ObjectReader``) and fsspec is synchronous, so
this is the blocking form of the same path, built from the same pieces: blocks
of ``block_size`` keyed by ``block_key`` (salted as a mount of the volume salts
them, so a block means the same bytes in both), the mount's
``MemoryBlockCache``, and ``ThreadFlights`` so that threads reading one cold
block (pyarrow reads column chunks on a pool) share one GET. A run of
consecutive missing blocks is one ranged GET, split into blocks afterwards.

Every GET names the version (``get_range``'s ``etag``: S3's If-Match): bytes
of another version are never cached or returned; the caller gets
``ObjectChanged`` (ESTALE) and should look the file up again.

A block not in memory is asked of a mount of the volume on this node first
(``LocalMount``, when there is one): the mount's tiers are then the one cache of
every process, so its blocks are not put in memory here too (that would hold
them twice, once per process), only in a small window of the last few
(``MountWindow``): the block a reader reads in 1 MiB pieces and the blocks
fetched ahead of it cross the socket once. Only where no mount serves it is the
block read from the store and kept in memory: exactly the path without a mount.

Sequential readers have the blocks after the one they read fetched ahead
(``prefetch``) on a few threads of their own, so a cold file streams at the
rate of several GETs in flight rather than one at a time; a read of a block
being fetched ahead joins that fetch (``ThreadFlights``) instead of sending a
second.

Thread-safe; its connections to the mount are per thread and per process, and
the store's too, so a forked process builds a new one (``VolumeHandle``).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

from cloudfs.cache.interface import BlockTier
from cloudfs.client.local_mount import LocalMount
from cloudfs.data.blocks import (
    ObjectRef,
    block_key,
    block_length,
    blocks_for_range,
    consecutive_runs,
)
from cloudfs.errors import FsError, ObjectChanged
from cloudfs.peers.flights import ThreadFlights
from cloudfs.ufs.interface import ObjectStore

log = logging.getLogger(__name__)

MAX_RUN_BLOCKS = 8  # one GET covers at most this many blocks (32 MiB of 4 MiB blocks)
AHEAD_THREADS = 4  # GETs ahead at once, for all the process's readers
AHEAD_RUN_BLOCKS = 2  # blocks per GET ahead: 8 MiB (a mount's ranged read-ahead GETs one)
WINDOW_BLOCKS = 12  # blocks from the mount held here: a read's and those fetched ahead
AHEAD_WAIT = 60.0  # seconds a reader waits for a block on its way before its own GET


class BlockFetcher:
    def __init__(
        self,
        store: ObjectStore,
        memory: BlockTier,
        salt: str,
        block_size: int,
        local: LocalMount | None = None,
        window_blocks: int = WINDOW_BLOCKS,
    ) -> None:
        """``local``: the mount to ask first (None: the store only); ``window_blocks``:
        how many of its blocks to hold (``MountWindow``)."""
        self._store = store
        self._memory = memory
        self._local = local
        self._salt = salt
        self.block_size = block_size
        self._flights: ThreadFlights[str, bytes] = ThreadFlights()
        self._window = MountWindow(window_blocks)
        self._ahead: dict[str, threading.Event] = {}  # keys on their way: set when there
        self._ahead_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def read(self, ref: ObjectRef, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``ref`` (short at its end)."""
        end = min(end, ref.size)
        if end <= start:
            return b""
        bs = self.block_size
        indexes = list(blocks_for_range(start, end, bs))
        blocks: dict[int, bytes] = {}
        missing: list[int] = []
        for index in indexes:
            key = self._key(ref, index)
            self._await_ahead(key)  # on its way: one GET, not two
            data = self._memory.get(key, block_length(index, ref.size, bs))
            if data is None:
                data = self._from_mount(ref, index)
            if data is None:
                missing.append(index)
            else:
                blocks[index] = data
        for run in consecutive_runs(missing, MAX_RUN_BLOCKS):
            blocks.update(self._fetch_run(ref, run))
        first = indexes[0] * bs
        joined = b"".join(memoryview(blocks[i]) for i in indexes)
        return joined[start - first : end - first]

    def prefetch(self, ref: ObjectRef, start: int, end: int) -> None:
        """Fetch the blocks of ``[start, end)`` in the background, into memory (or the
        node's mount, a block at a time), unless there or on their way already."""
        end = min(end, ref.size)
        if end <= start:
            return
        through_mount = self._local is not None and self._local.serving()
        run_blocks = 1 if through_mount else AHEAD_RUN_BLOCKS  # the mount serves blocks
        with self._ahead_lock:
            missing = []
            for index in blocks_for_range(start, end, self.block_size):
                key = self._key(ref, index)
                if key not in self._ahead and not self._memory.contains(key):
                    missing.append(index)
            for run in consecutive_runs(missing, run_blocks):
                for index in run:
                    self._ahead[self._key(ref, index)] = threading.Event()
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(AHEAD_THREADS, "cloudfs-ahead")
                self._pool.submit(self._fetch_ahead, ref, run)

    def close(self) -> None:
        with self._ahead_lock:
            pool, self._pool = self._pool, None
            for cancelled in self._ahead.values():  # no reader waits for them
                cancelled.set()
            self._ahead.clear()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if self._local is not None:
            self._local.close()

    def _await_ahead(self, key: str) -> None:
        with self._ahead_lock:
            arriving = self._ahead.get(key)
        if arriving is not None:
            arriving.wait(AHEAD_WAIT)

    def _fetch_ahead(self, ref: ObjectRef, run: list[int]) -> None:
        try:
            if len(run) == 1 and self._from_mount(ref, run[0]) is not None:
                return
            todo = [i for i in run if not self._memory.contains(self._key(ref, i))]
            for part in consecutive_runs(todo, len(run)):
                self._get(ref, part)
        except (FsError, OSError) as e:  # the reader's own read meets it, and says so
            log.debug("fetching %s blocks %s ahead: %s", ref.key, run, e)
        finally:
            with self._ahead_lock:
                for index in run:
                    arrived = self._ahead.pop(self._key(ref, index), None)
                    if arrived is not None:
                        arrived.set()

    def _from_mount(self, ref: ObjectRef, index: int) -> bytes | None:
        """The block from the node's mount, or None where none serves it."""
        if self._local is None:
            return None
        key = self._key(ref, index)
        data = self._window.get(key)
        if data is None:
            data = self._local.get(ref, index)
            if data is not None:
                self._window.put(key, data)
        return data

    def _key(self, ref: ObjectRef, index: int) -> str:
        return block_key(self._salt, ref, index, self.block_size)

    def _fetch_run(self, ref: ObjectRef, run: list[int]) -> dict[int, bytes]:
        if len(run) == 1:  # the common case of small files and random reads: shared
            index = run[0]
            data, _ = self._flights.do(self._key(ref, index), lambda: self._get(ref, run)[index])
            return {index: data}
        return self._get(ref, run)

    def _get(self, ref: ObjectRef, run: list[int]) -> dict[int, bytes]:
        """One ranged GET of that version for the blocks of ``run``, each put in memory."""
        bs = self.block_size
        start = run[0] * bs
        lengths = [block_length(i, ref.size, bs) for i in run]
        total = sum(lengths)
        data = self._store.get_range(ref.key, start, total, ref.etag)
        if len(data) != total:  # that version, but not of the size the tree said
            raise ObjectChanged(f"{ref.key!r}: got {len(data)} bytes at {start}, not {total}")
        out: dict[int, bytes] = {}
        offset = 0
        for index, length in zip(run, lengths, strict=True):
            block = bytes(data[offset : offset + length])
            self._memory.put(self._key(ref, index), block)
            out[index] = block
            offset += length
        return out


class MountWindow:
    """The last ``blocks`` blocks the mount gave, least recently used out first."""

    def __init__(self, blocks: int) -> None:
        self._blocks = blocks
        self._held: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            data = self._held.get(key)
            if data is not None:
                self._held.move_to_end(key)
            return data

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
            self._held[key] = data
            self._held.move_to_end(key)
            while len(self._held) > self._blocks:
                self._held.popitem(last=False)
