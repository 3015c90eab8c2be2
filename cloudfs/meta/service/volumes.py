"""Volumes of the tree service: named trees over UFSes, all in one KV engine.

A volume record (``V:<name>`` -> JSON: UFS URI, listing TTL, default owner
and modes, its tree's key prefix) says where the volume's tree lives: under
``T<8-byte id>`` in the same engine, seen by its tree operations through a
``PrefixedKV``. Each volume is served by one ``EmbeddedMeta`` built on first
use (the tree operations, their UFS listings and locks), so several volumes
share a server and its engine without sharing inodes.

Deleting a volume deletes its tree in batches, then its record; the UFS keeps
every object. Thread-safe.

Trees serve stale listings while re-listing them in the background
(``revalidate``); what a listing changes reaches the mounts' change streams
like their own commits (``changes.listing_changed``).

Over a shared engine (etcd, several tree servers), each tree takes the
engine's cross-server namespace lock (``ns_lock``), and a ``ChangePump``
brings the other servers' commits to this server's change feeds.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from typing import Protocol

from cloudfs.errors import AlreadyExists, NotFound
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine import codec
from cloudfs.meta.engine.kv import KVEngine, KVTxn, SharedKV
from cloudfs.meta.engine.kv_prefixed import PrefixedKV
from cloudfs.meta.engine.kv_retry import write_txn
from cloudfs.meta.service.change_pump import ChangePump
from cloudfs.meta.service.changes import ChangeFeed, WatchedKV, listing_changed
from cloudfs.meta.wire.volumes import VolumeSpec, validate_volume_name
from cloudfs.ufs.interface import ObjectStore

VOLUME_PREFIX = b"V:"
TREE_PREFIX = b"T"
DELETE_BATCH = 500


class Volumes:
    def __init__(
        self,
        engine: KVEngine,
        open_store: Callable[[str], ObjectStore],
        *,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._engine = engine
        self._open_store = open_store
        self._clock = clock
        self._lock = threading.Lock()
        self._trees: dict[str, EmbeddedMeta] = {}
        self._feeds: dict[str, ChangeFeed] = {}
        self._tree_feeds: dict[bytes, ChangeFeed] = {}  # by tree id, for the pump
        self._pump: ChangePump | None = None
        if isinstance(engine, SharedKV):
            self._pump = ChangePump(engine, TREE_PREFIX, self._tree_feeds.get, self._every_feed)
            self._pump.start()

    @property
    def engine(self) -> KVEngine:
        """The shared engine (cache groups live in it too: ``groups.py``)."""
        return self._engine

    def create(self, spec: VolumeSpec) -> VolumeSpec:
        validate_volume_name(spec.name)
        self._open_store(spec.ufs_uri)  # a bad URI fails here, not at first mount
        key = VOLUME_PREFIX + spec.name.encode()
        created = VolumeSpec(
            **{**asdict(spec), "created_ns": self._clock(), "tree_id": os.urandom(8).hex()}
        )

        def add(txn: KVTxn) -> None:
            if txn.get(key) is not None:
                raise AlreadyExists(f"volume {spec.name!r} exists")
            txn.put(key, json.dumps(asdict(created)).encode())

        write_txn(self._engine, add)
        return created

    def get(self, name: str) -> VolumeSpec:
        with self._engine.transaction(write=False) as txn:
            raw = txn.get(VOLUME_PREFIX + name.encode())
        if raw is None:
            raise NotFound(f"no volume {name!r}")
        return VolumeSpec(**json.loads(raw))

    def list(self) -> list[VolumeSpec]:
        with self._engine.transaction(write=False) as txn:
            return [VolumeSpec(**json.loads(raw)) for _, raw in txn.scan(VOLUME_PREFIX)]

    def delete(self, name: str) -> None:
        spec = self.get(name)
        with self._lock:
            tree = self._trees.pop(name, None)
        if tree is not None:
            tree.close()
        prefix = TREE_PREFIX + bytes.fromhex(spec.tree_id)

        def delete_batch(txn: KVTxn) -> int:
            keys = [k for k, _ in txn.scan(prefix, limit=DELETE_BATCH)]
            for k in keys:
                txn.delete(k)
            return len(keys)

        while write_txn(self._engine, delete_batch) == DELETE_BATCH:
            pass
        write_txn(self._engine, lambda txn: txn.delete(VOLUME_PREFIX + name.encode()))

    def tree(self, name: str) -> EmbeddedMeta:
        """The volume's tree operations (``NotFound`` for an unknown volume)."""
        with self._lock:  # built once: opening a tree also clears its stale open counts
            tree = self._trees.get(name)
            if tree is None:
                tree = self._trees[name] = self._build(self.get(name))
            return tree

    def feed(self, name: str) -> ChangeFeed:
        """Where the volume's committed changes are published (for Watch)."""
        self.tree(name)
        with self._lock:
            return self._feeds.setdefault(name, ChangeFeed())

    def _every_feed(self) -> tuple[ChangeFeed, ...]:
        with self._lock:
            return tuple(self._feeds.values())

    def _build(self, spec: VolumeSpec) -> EmbeddedMeta:
        feed = self._feeds.setdefault(spec.name, ChangeFeed())
        tree_id = bytes.fromhex(spec.tree_id)
        self._tree_feeds[tree_id] = feed
        prefix = TREE_PREFIX + tree_id
        engine = self._engine
        mutex = engine.mutex(prefix + codec.NS_LOCK_KEY) if isinstance(engine, SharedKV) else None
        return EmbeddedMeta.with_defaults(
            WatchedKV(PrefixedKV(engine, prefix), feed, shared=mutex is not None),
            self._open_store(spec.ufs_uri),
            spec,
            clock=self._clock,
            shared=True,
            ns_mutex=mutex,
            revalidate=True,
            on_listing_change=partial(listing_changed, feed),
        )

    def close(self) -> None:
        if self._pump is not None:
            self._pump.close()
        with self._lock:
            trees, self._trees = list(self._trees.values()), {}
        for tree in trees:
            tree.close()


class VolumeSet(Protocol):
    """What a ``TreeServer`` serves: ``Volumes``, or one mount's own tree (``single.py``)."""

    @property
    def engine(self) -> KVEngine: ...

    def create(self, spec: VolumeSpec) -> VolumeSpec: ...

    def get(self, name: str) -> VolumeSpec: ...

    def list(self) -> list[VolumeSpec]: ...

    def delete(self, name: str) -> None: ...

    def tree(self, name: str) -> EmbeddedMeta: ...

    def feed(self, name: str) -> ChangeFeed: ...
