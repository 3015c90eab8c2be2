"""Holdings: what the block tiers hold of an object, and dropping it.

A block is *held* when the memory tier has it, the disk tier has it, or it
waits for its disk write (``DiskWriteBehind``); a block being fetched is not
held, but it is *cached* (``cached_bytes``: warm-up and ``cloudfs warmup``
count it as on its way). None of these count a hit or a miss.
"""

from __future__ import annotations

from cloudfs.data.blocks import ObjectRef, block_count, block_key, blocks_for_range
from cloudfs.data.loader import BlockLoader


class Holdings:
    def __init__(self, loader: BlockLoader, store_id: str) -> None:
        self._loader = loader
        self._memory = loader.memory
        self._bs = loader.block_size
        self._store_id = store_id

    def _held(self, key: str) -> bool:
        return (
            self._memory.contains(key)
            or self._loader.on_disk(key)
            or self._loader.pending(key) is not None
        )

    def holds(self, ref: ObjectRef, offset: int, size: int) -> bool:
        """Whether a tier holds every block of the range now (in flight does not count)."""
        end = min(offset + size, ref.size)
        for index in blocks_for_range(offset, end, self._bs):
            if not self._held(self._loader.key(ref, index)):
                return False
        return True

    def held_bytes(self, ref: ObjectRef, keys: list[str] | None = None) -> int:
        """Bytes of ``ref`` a tier holds now (not in flight); safe in a worker thread.

        ``keys``: its ``block_keys``, if the caller has them already."""
        held = 0
        for index, key in enumerate(self.block_keys(ref) if keys is None else keys):
            if self._held(key):
                held += self._loader.length(ref, index)
        return held

    def block_keys(self, ref: ObjectRef) -> list[str]:
        """The cache keys of every block of ``ref`` (not remembered: safe in bulk, in threads)."""
        return [
            block_key(self._store_id, ref, index, self._bs)
            for index in range(block_count(ref.size, self._bs))
        ]

    def cached_bytes(self, ref: ObjectRef) -> int:
        """How many bytes of ``ref`` a tier holds or is fetching (counts no hit or miss)."""
        return sum(
            self._loader.length(ref, index)
            for index in range(block_count(ref.size, self._bs))
            if self._loader.is_cached(self._loader.key(ref, index))
        )

    async def evict(self, ref: ObjectRef) -> int:
        """Drop every block of ``ref`` from every tier; returns the bytes that were held.

        The caller first waits for queued disk writes (else one would put a block back)."""
        dropped = 0
        keys = []
        for index in range(block_count(ref.size, self._bs)):
            key = self._loader.key(ref, index)
            if self._loader.is_cached(key):
                dropped += self._loader.length(ref, index)
            self._memory.discard(key)
            keys.append(key)
        await self._loader.disk_discard(keys)
        return dropped
