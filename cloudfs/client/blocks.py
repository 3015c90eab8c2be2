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
them twice, once per process). Only where no mount serves it is the block read
from the store and kept here: exactly the path without a mount.

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
AHEAD_THREADS = 4  # blocks fetched ahead at once, for all the process's readers


class BlockFetcher:
    def __init__(
        self,
        store: ObjectStore,
        memory: BlockTier,
        salt: str,
        block_size: int,
        local: LocalMount | None = None,
    ) -> None:
        """``local``: the mount to ask first (None: the store only)."""
        self._store = store
        self._memory = memory
        self._local = local
        self._salt = salt
        self.block_size = block_size
        self._flights: ThreadFlights[str, bytes] = ThreadFlights()
        self._ahead: set[str] = set()  # keys being fetched ahead
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
            data = self._memory.get(self._key(ref, index), block_length(index, ref.size, bs))
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
        """Fetch the blocks of ``[start, end)`` in the background, into memory (or
        the node's mount), unless there or on their way already."""
        end = min(end, ref.size)
        if end <= start:
            return
        for index in blocks_for_range(start, end, self.block_size):
            key = self._key(ref, index)
            if self._memory.contains(key):
                continue
            with self._ahead_lock:
                if key in self._ahead:
                    continue
                self._ahead.add(key)
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(AHEAD_THREADS, "cloudfs-ahead")
                self._pool.submit(self._fetch_ahead, ref, index, key)

    def close(self) -> None:
        with self._ahead_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if self._local is not None:
            self._local.close()

    def _fetch_ahead(self, ref: ObjectRef, index: int, key: str) -> None:
        try:
            if not self._memory.contains(key) and self._from_mount(ref, index) is None:
                self._fetch_run(ref, [index])
        except (FsError, OSError) as e:  # the reader's own read meets it, and says so
            log.debug("fetching %s block %d ahead: %s", ref.key, index, e)
        finally:
            with self._ahead_lock:
                self._ahead.discard(key)

    def _from_mount(self, ref: ObjectRef, index: int) -> bytes | None:
        """The block from the node's mount, or None where none serves it."""
        if self._local is None:
            return None
        return self._local.get(ref, index)

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
