"""A Meta under test with its UFS, a fake clock and helpers to look at the UFS directly."""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cloudfs.errors import NotFound
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.types import Attr, InodeId
from cloudfs.ufs.interface import ObjectStore

TTL = 5.0


class FakeClock:
    """Nanoseconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1_700_000_000 * 10**9

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1e9)


@dataclass
class MetaWorld:
    meta: EmbeddedMeta
    store: ObjectStore
    clock: FakeClock
    make_meta: Callable[[], EmbeddedMeta]
    persistent: bool
    closed: list[EmbeddedMeta] = field(default_factory=list)

    def reopen(self) -> None:
        """Close the tree and open it again (what a remount does)."""
        self.meta.close()
        self.meta = self.make_meta()

    def expire(self) -> None:
        """Let every listing go stale."""
        self.clock.advance(TTL + 1)

    def upload(self, ino: InodeId, data: bytes) -> Attr:
        """What the data layer does: put the bytes at the object key, then commit."""
        info = self.store.put_bytes(self.meta.object_key(ino), data)
        return self.meta.commit_upload(ino, info.size, info.mtime_ns, info.etag)

    def ufs_names(self, prefix: str = "") -> set[str]:
        """Names directly under ``prefix`` in the UFS; directories end with "/"."""
        names: set[str] = set()
        token: str | None = None
        while True:
            page = self.store.list_dir(prefix, token)
            names |= {o.key.rsplit("/", 1)[-1] for o in page.objects}
            names |= {p.rsplit("/", 1)[-1] + "/" for p in page.prefixes}
            token = page.next_token
            if token is None:
                return names

    def ufs_data(self, key: str) -> bytes | None:
        try:
            info = self.store.head(key)
        except NotFound:
            return None
        return self.store.get_range(key, 0, info.size)


WORLD_KINDS = ["memory-kv", "lmdb-kv", "local-store"]
# The Meta contract suite also runs over a real etcd (testkit/etcd.py).
CONTRACT_WORLD_KINDS = [*WORLD_KINDS, "etcd-kv"]


def make_world(kind: str, tmp_dir: str, etcd_endpoints: list[str] | None = None) -> MetaWorld:
    """A fresh tree of ``kind``: MemoryKV or LmdbKV over the memory store, LMDB over
    ``LocalObjectStore`` (skipped until ``cloudfs.ufs.local`` exists), or EtcdKV
    over the memory store, under a fresh key prefix of the etcd at ``etcd_endpoints``."""
    import os
    import uuid

    from cloudfs.meta.engine.kv import KVEngine
    from cloudfs.meta.engine.kv_etcd import EtcdKV
    from cloudfs.meta.engine.kv_lmdb import LmdbKV
    from cloudfs.meta.engine.kv_memory import MemoryKV
    from testkit.memory_store import MemoryObjectStore

    clock = FakeClock()
    store: ObjectStore
    if kind == "local-store":
        local = pytest.importorskip("cloudfs.ufs.local")
        root = os.path.join(tmp_dir, "ufs")
        os.makedirs(root, exist_ok=True)
        store = local.LocalObjectStore(root)
    else:
        store = MemoryObjectStore()
    lmdb_dir = os.path.join(tmp_dir, "tree")
    memory = MemoryKV()
    etcd_prefix = f"world-{uuid.uuid4().hex}/".encode()

    def make_meta() -> EmbeddedMeta:
        engine: KVEngine
        if kind == "memory-kv":
            engine = memory
        elif kind == "etcd-kv":
            assert etcd_endpoints is not None, "etcd-kv needs the etcd fixture's endpoints"
            engine = EtcdKV(etcd_endpoints, etcd_prefix)
        else:
            engine = LmdbKV(lmdb_dir)
        return EmbeddedMeta(
            engine,
            store,
            ttl=TTL,
            default_uid=1000,
            default_gid=1000,
            file_mode=0o644,
            dir_mode=0o755,
            clock=clock,
        )

    return MetaWorld(make_meta(), store, clock, make_meta, persistent=kind != "memory-kv")


def open_world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetaWorld]:
    """For a fixture: the world of kind ``request.param``, closed afterwards.

    "etcd-kv" starts (or reuses) the session's ``etcd`` fixture."""
    endpoints = None
    if request.param == "etcd-kv":
        endpoints = request.getfixturevalue("etcd").endpoints
    world = make_world(request.param, str(tmp_path), endpoints)
    yield world
    world.meta.close()


def mkfile(w: MetaWorld, parent: InodeId, name: bytes, data: bytes | None = b"x") -> InodeId:
    """Create a file through the mount, uploaded unless ``data`` is None."""
    ino = w.meta.create(parent, name, stat.S_IFREG | 0o600, 1, 2).inode
    if data is not None:
        w.upload(ino, data)
    return ino
