"""A change that adds a name checks, in its own transaction, that its directory is listed.

A directory due for a listing (never listed, or older than the TTL) is listed
from the UFS first, so a name only the UFS holds is found taken; one that is
listed costs the change no read of its own (over etcd: one read round trip and
the commit, not a freshness read before them). Over the memory engine and a
real etcd.
"""

from __future__ import annotations

import errno
import stat
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cloudfs.errors import FsError
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine.kv import KVEngine
from cloudfs.types import ROOT_INODE, InodeId
from testkit.etcd import EtcdCluster
from testkit.memory_store import MemoryObjectStore

R = InodeId(ROOT_INODE)
FILE = stat.S_IFREG | 0o644
DIR = stat.S_IFDIR | 0o755
TTL = 10.0


class World:
    def __init__(self, engine: KVEngine) -> None:
        self.clock = [10**18]
        self.store = MemoryObjectStore()
        self.meta = EmbeddedMeta(engine, self.store, ttl=TTL, clock=lambda: self.clock[0])

    def later(self, seconds: float) -> None:
        self.clock[0] += int(seconds * 1e9)


@pytest.fixture
def world(engine: KVEngine) -> Iterator[World]:
    w = World(engine)
    yield w
    w.meta.close()


ADDS: dict[str, Callable[[EmbeddedMeta, bytes], object]] = {
    "create": lambda m, n: m.create(R, n, FILE, 0, 0),
    "create_open": lambda m, n: m.create_open(R, n, 0o644, 0, 0),
    "mkdir": lambda m, n: m.mkdir(R, n, DIR, 0, 0),
    "symlink": lambda m, n: m.symlink(R, n, b"target", 0, 0),
}


@pytest.mark.parametrize("op", sorted(ADDS))
def test_a_change_in_a_directory_never_listed_finds_the_ufs_names(world: World, op: str) -> None:
    world.store.put_bytes("only-in-the-ufs", b"bytes")
    with pytest.raises(FsError) as caught:
        ADDS[op](world.meta, b"only-in-the-ufs")
    assert caught.value.errno == errno.EEXIST
    assert world.meta.lookup(R, b"only-in-the-ufs").size == 5


def test_a_change_past_the_ttl_lists_again_first(world: World) -> None:
    meta = world.meta
    meta.create(R, b"first", FILE, 0, 0)  # lists the root
    world.store.put_bytes("late", b"12")
    meta.create(R, b"second", FILE, 0, 0)  # within the TTL: the UFS is not asked
    world.later(TTL + 1)
    with pytest.raises(FsError) as caught:
        meta.create(R, b"late", FILE, 0, 0)
    assert caught.value.errno == errno.EEXIST


def test_a_link_into_a_directory_never_listed_lists_it_first(world: World) -> None:
    meta = world.meta
    world.store.put_bytes("d/taken", b"x")
    f = meta.create(R, b"f", FILE, 0, 0)
    d = meta.lookup(R, b"d").inode  # the root is listed; d is not yet
    with pytest.raises(FsError) as caught:
        meta.link(f.inode, d, b"taken")
    assert caught.value.errno == errno.EEXIST


def test_an_inline_create_answers_none_until_the_directory_is_listed(world: World) -> None:
    meta = world.meta
    assert meta.create_if_ready(R, b"x", 0o644, 0, 0) is None
    meta.readdir(R, None, 1)
    assert meta.create_if_ready(R, b"x", 0o644, 0, 0) is not None
    world.later(TTL + 1)
    assert meta.create_if_ready(R, b"y", 0o644, 0, 0) is None


def test_a_create_in_a_listed_directory_costs_one_read_and_the_commit_over_etcd(
    etcd: EtcdCluster, etcd_prefix: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cloudfs.meta.engine.kv_etcd import EtcdKV

    kv = EtcdKV(etcd.endpoints, etcd_prefix)
    meta = EmbeddedMeta(kv, MemoryObjectStore(), ttl=3600)
    calls: Counter[str] = Counter()
    sent = kv.call

    def counted(method: str, request: Any, **kw: Any) -> Any:
        calls[method] += 1
        return sent(method, request, **kw)

    try:
        d = meta.mkdir(R, b"d", DIR, 0, 0).inode
        meta.create(d, b"warm", FILE, 0, 0)  # this server's batch of inode numbers
        monkeypatch.setattr(kv, "call", counted)
        for i in range(5):
            meta.create(d, f"f{i}".encode(), FILE, 0, 0)
        assert calls == {"Txn": 10}, calls  # per create: a Txn of reads and the commit
    finally:
        meta.close()
        kv.close()
