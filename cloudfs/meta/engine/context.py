"""What every tree operation needs: the KV engine, the UFS, settings and a clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cloudfs.meta.engine.inode_numbers import InodeNumbers
from cloudfs.meta.engine.kv import KVEngine
from cloudfs.meta.engine.settings import TreeSettings
from cloudfs.ufs.interface import ObjectStore


@dataclass(frozen=True, slots=True)
class TreeContext:
    kv: KVEngine
    store: ObjectStore
    settings: TreeSettings
    clock: Callable[[], int]  # nanoseconds since the epoch (time.time_ns in production)
    numbers: InodeNumbers = field(default_factory=InodeNumbers)  # for new inodes
