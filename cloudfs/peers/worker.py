"""BlockWorker: one block of any store, from a cache worker's tiers or fetched once.

The read path of a mount, without the mount: memory tier -> disk tier ->
one ranged GET to the object store, shared by every concurrent caller of
the block (``ThreadFlights``), whose bytes then go to both tiers. The tiers
are the mount's own (``MemoryBlockCache``, ``DiskBlockCache``: the disk
tier's crc32 per block file, its admission and eviction), and blocks are
keyed as a mount keys them (``block_key``: store, object key, ETag, block
size, index), so a changed object never meets an old block.

The ETag is checked, not trusted: the GET is conditional on it
(``get_range``'s ``etag``: S3's If-Match, in the same request), so the bytes
are the version the caller named or there are none (``ObjectChanged``,
nothing cached), even for an object rewritten between the caller's listing
and our GET. Bytes of that version but fewer than the block the caller's
object size implies are ``ObjectChanged`` too: the caller's view is wrong.

Every method is blocking and thread-safe (the HTTP server's threads call it).
Errors are ``FsError``s: ``InvalidArgument`` for a request that names no
block, ``NotFound``, ``ObjectChanged`` (ESTALE), ``AccessDenied`` and the
store's ``RemoteIOError`` (after its own bounded retries and timeouts).
"""

from __future__ import annotations

from dataclasses import dataclass

from cloudfs.cache.interface import BlockTier
from cloudfs.data.blocks import ObjectRef, block_count, block_key, block_length
from cloudfs.errors import InvalidArgument, ObjectChanged
from cloudfs.metrics import Metrics
from cloudfs.peers.flights import ThreadFlights
from cloudfs.peers.stores import OpenStore, StoreSource
from cloudfs.peers.wire import MAX_BLOCK_BYTES
from cloudfs.ufs.interface import ObjectStore

MIN_BLOCK_BYTES = 64 * 1024  # the smallest --block-size


@dataclass(frozen=True, slots=True)
class BlockRequest:
    """The block a caller names (``wire.Query`` of a GET /v1/block), as plain values."""

    store_uri: str
    key: str
    etag: str
    object_size: int
    block_size: int
    index: int


class BlockWorker:
    def __init__(
        self, stores: StoreSource, memory: BlockTier, disk: BlockTier, metrics: Metrics
    ) -> None:
        self._stores = stores
        self._memory = memory
        self._disk = disk
        self._metrics = metrics
        self._flights: ThreadFlights[str, bytes] = ThreadFlights()

    def get_block(self, request: BlockRequest) -> tuple[bytes, str]:
        """The block's bytes, and where they came from: "memory", "disk" or "origin"."""
        opened, ref, key, length = self._locate(request)
        data = self._memory.get(key, length)
        if data is not None and len(data) == length:
            return data, "memory"
        data = self._disk.get(key, length)
        if data is not None and len(data) == length:
            self._memory.put(key, data)
            return data, "disk"
        if data is not None:  # not what this version's block must be: never serve it
            self._disk.discard(key)
        return self._from_origin(opened, ref, key, request.index * request.block_size, length)

    def fill(self, request: BlockRequest) -> str:
        """Hold the block (warm-up through the group), without reading it if held:
        "memory" or "disk" if it was, "origin" if it was fetched now."""
        opened, ref, key, length = self._locate(request)
        for tier in (self._memory, self._disk):
            if tier.contains(key):
                return tier.tier
        self._from_origin(opened, ref, key, request.index * request.block_size, length)
        return "origin"

    def _locate(self, request: BlockRequest) -> tuple[OpenStore, ObjectRef, str, int]:
        """The block's store, object, cache key and exact length; ``InvalidArgument``
        for a request that names no block."""
        _validate(request)
        opened = self._stores.get(request.store_uri)
        ref = ObjectRef(request.key, request.etag, request.object_size)
        key = block_key(opened.salt, ref, request.index, request.block_size)
        return opened, ref, key, block_length(request.index, ref.size, request.block_size)

    def _from_origin(
        self, opened: OpenStore, ref: ObjectRef, key: str, start: int, length: int
    ) -> tuple[bytes, str]:
        data, led = self._flights.do(
            key, lambda: self._fetch(opened.store, ref, key, start, length)
        )
        if led:  # the leader writes the block file; its followers have their bytes already
            self._disk.put(key, data)
        return data, "origin"

    def _fetch(
        self, store: ObjectStore, ref: ObjectRef, key: str, start: int, length: int
    ) -> bytes:
        data = bytes(store.get_range(ref.key, start, length, ref.etag))  # that version only
        if len(data) != length:  # that version, but not of the size the caller said
            raise ObjectChanged(f"{ref.key!r}: got {len(data)} bytes at {start}, not {length}")
        self._memory.put(key, data)
        return data


def _validate(r: BlockRequest) -> None:
    if not r.store_uri or not r.key:
        raise InvalidArgument("a block needs its store_uri and key")
    if not r.etag:
        raise InvalidArgument(f"{r.key!r}: no ETag; an unversioned block cannot be shared")
    if not MIN_BLOCK_BYTES <= r.block_size <= MAX_BLOCK_BYTES:
        raise InvalidArgument(f"block_size {r.block_size} is not within 64 KiB..64 MiB")
    if not 0 <= r.index < block_count(r.object_size, r.block_size):
        raise InvalidArgument(
            f"{r.key!r}: no block {r.index} in {r.object_size} bytes of {r.block_size}-byte blocks"
        )
