"""What makes several tree servers on one etcd safe: the shared namespace lock, its fence,
the watch, and changes made through one server reaching the mounts of another."""

from __future__ import annotations

import queue
import stat
import threading
import time
from collections.abc import Iterator

import pytest

from cloudfs import errors
from cloudfs.etcdpb import rpc_pb2 as pb
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.engine.etcd_lock import EtcdMutex
from cloudfs.meta.engine.etcd_watch import EtcdWatch
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.kv_etcd import EtcdKV
from cloudfs.meta.engine.kv_retry import write_txn
from cloudfs.meta.interface import Invalidation
from cloudfs.meta.service.server import TreeServer
from cloudfs.meta.service.volumes import Volumes
from cloudfs.meta.wire.volumes import VolumeSpec
from cloudfs.types import ROOT_INODE, AttrChanges
from testkit.etcd import EtcdCluster
from testkit.memory_store import MemoryObjectStore

FILE = stat.S_IFREG | 0o644


@pytest.fixture
def two_engines(etcd: EtcdCluster, etcd_prefix: bytes) -> Iterator[tuple[EtcdKV, EtcdKV]]:
    """Two engines on one etcd and prefix: what two tree servers hold."""
    a, b = EtcdKV(etcd.endpoints, etcd_prefix), EtcdKV(etcd.endpoints, etcd_prefix)
    yield a, b
    a.close()
    b.close()


def test_the_mutex_admits_one_holder_across_engines(two_engines: tuple[EtcdKV, EtcdKV]) -> None:
    inside: list[int] = []
    overlaps: list[int] = []

    def worker(kv: EtcdKV, n: int) -> None:
        mutex = kv.mutex(b"lock")
        for _ in range(n):
            mutex.acquire()
            inside.append(1)
            if len(inside) > 1:
                overlaps.append(len(inside))
            time.sleep(0.002)
            inside.pop()
            mutex.release()

    threads = [threading.Thread(target=worker, args=(kv, 15)) for kv in two_engines * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not overlaps, "two holders at once"


def test_a_dead_holders_lock_is_taken_after_it_expires(two_engines: tuple[EtcdKV, EtcdKV]) -> None:
    a, b = two_engines
    EtcdMutex(a, b"lock", hold_for=0.5).acquire()  # and its holder "dies"
    waiter = EtcdMutex(b, b"lock", wait_for=10)
    started = time.monotonic()
    waiter.acquire()
    assert 0.3 < time.monotonic() - started < 5
    waiter.release()


def test_a_holder_past_its_expiry_cannot_commit(two_engines: tuple[EtcdKV, EtcdKV]) -> None:
    a, b = two_engines
    stalled = EtcdMutex(a, b"lock", hold_for=0.3)
    stalled.acquire()
    time.sleep(0.5)
    taker = EtcdMutex(b, b"lock")
    taker.acquire()  # the lock changed hands while the first holder stalled
    with pytest.raises(errors.RemoteIOError, match="lost the namespace lock"):
        write_txn(a, lambda txn: txn.put(b"k", b"late"))
    write_txn(b, lambda txn: txn.put(b"k", b"current"))  # the new holder writes
    taker.release()
    stalled.release()  # no longer ours: leaves the key alone
    with b.transaction(write=False) as txn:
        assert txn.get(b"k") == b"current"


def test_an_acquire_that_waits_too_long_is_eio(two_engines: tuple[EtcdKV, EtcdKV]) -> None:
    a, b = two_engines
    EtcdMutex(a, b"lock").acquire()
    with pytest.raises(errors.RemoteIOError) as caught:
        EtcdMutex(b, b"lock", wait_for=0.3).acquire()
    assert caught.value.errno == 5


def test_the_watch_sees_each_commit_whole(two_engines: tuple[EtcdKV, EtcdKV]) -> None:
    a, b = two_engines
    watch = b.watch(b"w/", b"w0")
    seen: queue.Queue[object] = queue.Queue()
    thread = threading.Thread(target=lambda: [seen.put(x) for x in watch], daemon=True)
    thread.start()
    assert watch.ready.wait(10)

    def both(txn: KVTxn) -> None:
        txn.put(b"w/1", b"x")
        txn.put(b"w/2", b"y")

    write_txn(a, both)
    write_txn(a, lambda txn: txn.delete(b"w/1"))
    write_txn(a, lambda txn: txn.put(b"outside", b"z"))
    first, second = seen.get(timeout=10), seen.get(timeout=10)
    watch.close()
    thread.join(timeout=10)
    assert isinstance(first, list) and isinstance(second, list)
    assert [(e.key, e.value) for e in first] == [(b"w/1", b"x"), (b"w/2", b"y")]
    assert len({e.revision for e in first}) == 1
    assert [(e.key, e.value) for e in second] == [(b"w/1", None)]
    assert seen.empty()


def watching(kv: EtcdKV) -> tuple[EtcdWatch, queue.Queue[object]]:
    """A watch of w/ on ``kv``, its batches put on a queue by a thread."""
    watch = kv.watch(b"w/", b"w0")
    seen: queue.Queue[object] = queue.Queue()
    threading.Thread(target=lambda: [seen.put(x) for x in watch], daemon=True).start()
    assert watch.ready.wait(10)
    return watch, seen


def test_a_broken_watch_stream_resumes_where_it_was(two_engines: tuple[EtcdKV, EtcdKV]) -> None:
    a, b = two_engines
    watch, seen = watching(b)
    write_txn(a, lambda txn: txn.put(b"w/1", b"x"))
    assert [e.key for e in seen.get(timeout=10)] == [b"w/1"]  # type: ignore[attr-defined]
    assert watch._stream is not None
    watch._stream.call.cancel()  # as if the connection broke
    write_txn(a, lambda txn: txn.put(b"w/2", b"y"))
    assert [e.key for e in seen.get(timeout=10)] == [b"w/2"]  # type: ignore[attr-defined]
    watch.close()
    assert seen.empty()


def test_a_watch_resumed_after_a_compaction_says_changes_were_lost(
    two_engines: tuple[EtcdKV, EtcdKV],
) -> None:
    a, b = two_engines
    write_txn(a, lambda txn: txn.put(b"x", b"1"))
    gone = a.range(pb.RangeRequest(key=b"-")).header.revision
    write_txn(a, lambda txn: txn.put(b"x", b"2"))
    a.call("Compact", pb.CompactionRequest(revision=gone + 1, physical=True))
    watch = b.watch(b"w/", b"w0")
    watch._next = gone  # as if its stream broke after seeing revision gone - 1
    batches = iter(watch)
    assert next(batches) is None
    write_txn(a, lambda txn: txn.put(b"w/3", b"z"))
    assert [e.key for e in next(batches) or []] == [b"w/3"]
    watch.close()


class Server:
    """An in-process tree server over etcd (two of them share a cluster)."""

    def __init__(self, etcd: EtcdCluster, prefix: bytes, store: MemoryObjectStore) -> None:
        self.engine = EtcdKV(etcd.endpoints, prefix)
        self.volumes = Volumes(self.engine, lambda uri: store)
        self.server = TreeServer(self.volumes, "127.0.0.1:0", token=None)
        self.server.start()
        self.address = f"127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        self.server.stop(0)
        self.volumes.close()
        self.engine.close()


@pytest.fixture
def two_servers(etcd: EtcdCluster, etcd_prefix: bytes) -> Iterator[tuple[Server, Server]]:
    store = MemoryObjectStore()
    a, b = Server(etcd, etcd_prefix, store), Server(etcd, etcd_prefix, store)
    a.volumes.create(VolumeSpec(name="v", ufs_uri="file:///data"))
    yield a, b
    a.stop()
    b.stop()


def listen(meta: GrpcMeta, into: queue.Queue[Invalidation]) -> None:
    """Collect ``meta``'s change stream in a thread until the client is closed."""

    def run() -> None:
        try:
            for change in meta.changes():
                into.put(change)
        except errors.FsError:
            pass  # closed

    threading.Thread(target=run, daemon=True).start()


def test_a_change_through_one_server_reaches_a_watcher_of_the_other(
    two_servers: tuple[Server, Server],
) -> None:
    a, b = two_servers
    writer, watcher = GrpcMeta(a.address, "v"), GrpcMeta(b.address, "v")
    f = writer.create(ROOT_INODE, b"f", FILE, 0, 0).inode
    got: queue.Queue[Invalidation] = queue.Queue()
    listen(watcher, got)
    time.sleep(0.5)  # the Watch call is in place
    writer.setattr(f, AttrChanges(size=123))
    deadline = time.monotonic() + 10
    while True:
        change = got.get(timeout=max(0.1, deadline - time.monotonic()))
        if f in change.inodes:
            break
    assert watcher.getattr(f).size == 123
    # the writer's own mount is not told about its own change
    own: queue.Queue[Invalidation] = queue.Queue()
    listen(writer, own)
    time.sleep(0.5)
    writer.setattr(f, AttrChanges(size=7))
    time.sleep(1.0)
    assert own.empty()
    writer.close()
    watcher.close()


def test_concurrent_creates_of_one_name_through_two_servers_one_wins(
    two_servers: tuple[Server, Server],
) -> None:
    a, b = two_servers
    clients = [GrpcMeta(s.address, "v") for s in (a, b, a, b)]
    start = threading.Barrier(len(clients))
    outcomes: list[str] = []

    def create(meta: GrpcMeta) -> None:
        start.wait(timeout=10)
        try:
            meta.create(ROOT_INODE, b"same", FILE, 0, 0)
            outcomes.append("created")
        except errors.AlreadyExists:
            outcomes.append("exists")

    threads = [threading.Thread(target=create, args=(m,)) for m in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcomes) == ["created", "exists", "exists", "exists"]
    names = [e.name for e in clients[0].readdir(ROOT_INODE, None, 100)]
    assert names.count(b"same") == 1
    for m in clients:
        m.close()
