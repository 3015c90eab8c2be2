"""``cloudfs.client`` reading through a mount's block socket, in one process: a real
``CacheServer`` on a UNIX socket over a ``BlockWorker`` on a ``file://`` store (what
``mount/local_blocks.py`` builds in a mount), and a real ``BlockFetcher`` with its
``LocalMount``. No FUSE (tests/fsspec/test_fsspec_local_mount.py has the whole thing):
what is counted here is the client's own store requests (``MeteredObjectStore``).
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.client.blocks import BlockFetcher
from cloudfs.client.local_mount import LocalMount
from cloudfs.data.blocks import ObjectRef
from cloudfs.errors import ObjectChanged
from cloudfs.metrics import Metrics
from cloudfs.peers.server import CacheServer
from cloudfs.peers.stores import SingleStore
from cloudfs.peers.worker import BlockWorker
from cloudfs.ufs.local import LocalObjectStore
from cloudfs.ufs.metered import MeteredObjectStore

BS = 64 * 1024
SALT = "0123456789abcdef"


@dataclass
class Node:
    ufs: Path
    socket: Path
    server: CacheServer
    mount_metrics: Metrics

    @property
    def uri(self) -> str:
        return f"file://{self.ufs}"

    def put(self, key: str, data: bytes) -> ObjectRef:
        (self.ufs / key).write_bytes(data)
        info = LocalObjectStore(str(self.ufs)).head(key)
        return ObjectRef(key, info.etag, info.size)

    def client(
        self,
        block_size: int = BS,
        find: list[Path] | None = None,
        probe: float = 5.0,
        window_blocks: int = 0,
    ) -> tuple[BlockFetcher, Metrics, LocalMount]:
        metrics = Metrics()
        candidates = [self.socket] if find is None else find
        local = LocalMount(
            SALT, self.uri, block_size, metrics, find=lambda: candidates, probe_seconds=probe
        )
        store = MeteredObjectStore(LocalObjectStore(str(self.ufs)), metrics)
        memory = MemoryBlockCache(64 * BS, metrics)
        # no window unless asked: every read crosses the socket, as these tests count
        fetcher = BlockFetcher(store, memory, SALT, block_size, local, window_blocks=window_blocks)
        return fetcher, metrics, local


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    ufs = tmp_path / "ufs"
    ufs.mkdir()
    # A short directory: a UNIX socket's path has at most 107 bytes.
    sockets = Path(tempfile.mkdtemp(prefix="cfs-lm-"))
    metrics = Metrics()
    store = MeteredObjectStore(LocalObjectStore(str(ufs)), metrics)
    worker = BlockWorker(
        SingleStore(f"file://{ufs}", store, SALT),
        MemoryBlockCache(64 * BS, metrics),
        MemoryBlockCache(64 * BS, metrics),
        metrics,
    )
    path = sockets / "blocks.sock"
    server = CacheServer(worker, str(path), metrics, block_size=BS)
    server.start()
    try:
        yield Node(ufs, path, server, metrics)
    finally:
        server.stop(grace=0)
        for p in sockets.iterdir():
            p.unlink()
        sockets.rmdir()


def count(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def gets(metrics: Metrics) -> float:
    return count(metrics, "cloudfs_ufs_requests_total", op="get")


def test_the_socket_is_the_users_only_and_gone_after_stop(node: Node) -> None:
    assert node.socket.stat().st_mode & 0o777 == 0o600
    node.server.stop(grace=0)
    assert not node.socket.exists()


def test_blocks_come_from_the_mount_and_stay_out_of_the_clients_memory(node: Node) -> None:
    data = os.urandom(3 * BS + 100)
    ref = node.put("a.bin", data)
    fetcher, metrics, _ = node.client()
    assert fetcher.read(ref, 0, ref.size) == data  # cold: the mount fetched it
    assert fetcher.read(ref, 10, BS + 20) == data[10 : BS + 20]  # now held by the mount
    assert gets(metrics) == 0
    assert (
        count(metrics, "cloudfs_blockcache_misses_total", tier="mount") == 4
    )  # fetched by the mount
    assert count(metrics, "cloudfs_blockcache_hits_total", tier="mount") == 2  # then held by it
    assert count(metrics, "cloudfs_blockcache_hits_total", tier="memory") == 0  # never cached here
    other, other_metrics, _ = node.client()  # another process: the same cache
    assert other.read(ref, 0, ref.size) == data
    assert gets(other_metrics) == 0
    assert count(other_metrics, "cloudfs_blockcache_hits_total", tier="mount") == 4


def test_the_clients_window_holds_the_last_blocks_the_mount_gave(node: Node) -> None:
    """A block read in pieces (1 MiB reads of a 4 MiB block) crosses the socket once;
    the window holds only its last few blocks, so older ones cross again."""
    data = os.urandom(3 * BS)
    ref = node.put("w.bin", data)
    fetcher, metrics, _ = node.client(window_blocks=2)
    for start in range(0, BS, BS // 4):
        assert fetcher.read(ref, start, start + BS // 4) == data[start : start + BS // 4]
    assert count(metrics, "cloudfs_blockcache_misses_total", tier="mount") == 1
    assert fetcher.read(ref, BS, 3 * BS) == data[BS:]  # two more: the first drops out
    assert fetcher.read(ref, 0, 10) == data[:10]
    asked = count(metrics, "cloudfs_blockcache_misses_total", tier="mount") + count(
        metrics, "cloudfs_blockcache_hits_total", tier="mount"
    )
    assert asked == 4
    assert gets(metrics) == 0


def test_a_changed_object_is_estale_not_old_bytes(node: Node) -> None:
    ref = node.put("b.bin", b"old" * BS)
    fetcher, _, _ = node.client()
    assert fetcher.read(ref, 0, 3) == b"old"
    node.put("b.bin", b"new" * BS)
    with pytest.raises(ObjectChanged):
        fetcher.read(ref, BS, BS + 3)  # a block the mount does not hold: its GET says so


def test_another_block_size_is_refused_and_read_from_the_store(node: Node) -> None:
    data = os.urandom(2 * BS * 2)
    ref = node.put("c.bin", data)
    fetcher, metrics, local = node.client(block_size=2 * BS)
    assert fetcher.read(ref, 0, ref.size) == data
    assert gets(metrics) == 1  # one run of both blocks, from the store
    assert local.path is None  # left out until the next probe


def test_a_stale_socket_is_skipped_for_a_live_one(node: Node, tmp_path: Path) -> None:
    stale = Path(tempfile.mkdtemp(prefix="cfs-lm-")) / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(stale))
    dead.close()  # the file stays, nothing listens: a mount killed with -9
    try:
        data = os.urandom(BS)
        ref = node.put("d.bin", data)
        only_stale, metrics, local = node.client(find=[stale])
        assert only_stale.read(ref, 0, BS) == data
        assert gets(metrics) == 1 and local.path is None
        both, metrics, local = node.client(find=[stale, node.socket])
        assert both.read(ref, 0, BS) == data
        assert gets(metrics) == 0 and local.path == str(node.socket)
    finally:
        stale.unlink()
        stale.parent.rmdir()


def test_a_mount_gone_midway_falls_back_and_is_looked_for_again_later(node: Node) -> None:
    data = os.urandom(2 * BS)
    ref = node.put("e.bin", data)
    fetcher, metrics, local = node.client(probe=3600)
    assert fetcher.read(ref, 0, BS) == data[:BS]
    node.server.stop(grace=0)  # unmounted: the socket is gone
    assert fetcher.read(ref, BS, 2 * BS) == data[BS:]
    assert gets(metrics) == 1 and local.path is None
    assert fetcher.read(ref, 0, BS) == data[:BS]  # not probed again before its time
    assert gets(metrics) == 2


def test_a_forked_child_opens_its_own_connection(node: Node) -> None:
    data = os.urandom(2 * BS)
    ref = node.put("f.bin", data)
    fetcher, metrics, _ = node.client()
    assert fetcher.read(ref, 0, BS) == data[:BS]  # the parent holds a connection now
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read both blocks, report whether they were right
        ok = fetcher.read(ref, 0, 2 * BS) == data and gets(metrics) == 0
        os.write(write_end, b"1" if ok else b"0")
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        assert pipe.read() == b"1"
    os.waitpid(pid, 0)
    assert fetcher.read(ref, 0, 2 * BS) == data  # the parent's connection still works
    assert gets(metrics) == 0
