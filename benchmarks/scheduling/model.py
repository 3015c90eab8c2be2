"""The simulated cluster's pieces: datasets, jobs, and nodes with a block cache."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

MIB = 1 << 20
GIB = 1 << 30

BlockKey = tuple[str, int]
"""(dataset name, block index): one cached block."""


@dataclass(frozen=True)
class Dataset:
    """A dataset as its size; it is read in blocks of the simulation's block size."""

    name: str
    size_bytes: int

    def block_count(self, block_bytes: int) -> int:
        return -(-self.size_bytes // block_bytes)

    def block_size(self, index: int, block_bytes: int) -> int:
        """Bytes in block `index` (the last one may be short)."""
        return min(block_bytes, self.size_bytes - index * block_bytes)


@dataclass(frozen=True)
class Job:
    """A training job: reads `dataset` whole, `epochs` times, on one node with `gpus` GPUs."""

    job_id: int
    dataset: str
    epochs: int
    gpus: int
    arrival_s: float


class BlockLRU:
    """A node's disk cache of fixed size: whole blocks, least recently used evicted first.

    The mount's disk tier evicts whole blocks by recency; this is that, without
    its memory tier or admission policy.
    """

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0
        self._blocks: OrderedDict[BlockKey, int] = OrderedDict()
        self._per_dataset: dict[str, int] = {}

    def __contains__(self, key: BlockKey) -> bool:
        return key in self._blocks

    def touch(self, key: BlockKey) -> None:
        """Mark a held block as the most recently used."""
        self._blocks.move_to_end(key)

    def insert(self, key: BlockKey, size: int) -> list[BlockKey]:
        """Hold a block (most recently used), evicting LRU blocks to make room.

        Returns the evicted keys, oldest first. A block larger than the whole
        cache is not held; one already held is only touched.
        """
        if key in self._blocks:
            self.touch(key)
            return []
        if size > self.capacity_bytes:
            return []
        evicted: list[BlockKey] = []
        while self.used_bytes + size > self.capacity_bytes:
            old, old_size = self._blocks.popitem(last=False)
            self._account(old[0], -old_size)
            evicted.append(old)
        self._blocks[key] = size
        self._account(key[0], size)
        return evicted

    def cached_bytes(self, dataset: str) -> int:
        """Bytes of `dataset` held now."""
        return self._per_dataset.get(dataset, 0)

    def lru_order(self) -> list[BlockKey]:
        """Held keys, least recently used first."""
        return list(self._blocks)

    def _account(self, dataset: str, delta: int) -> None:
        self.used_bytes += delta
        left = self._per_dataset.get(dataset, 0) + delta
        if left:
            self._per_dataset[dataset] = left
        else:
            self._per_dataset.pop(dataset, None)


@dataclass
class Node:
    """A node: GPUs to hand out and one block cache shared by its jobs."""

    name: str
    gpus: int
    cache: BlockLRU
    used_gpus: int = 0
    running: dict[int, str] = field(default_factory=dict)
    """Job id -> dataset of the jobs running here."""

    @property
    def free_gpus(self) -> int:
        return self.gpus - self.used_gpus

    def other_datasets(self, dataset: str) -> int:
        """How many datasets other than `dataset` the node's running jobs read."""
        return len(set(self.running.values()) - {dataset})
