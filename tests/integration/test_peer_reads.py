"""The mount's read path with a cache group, in one process: a real ``ObjectReader`` over
a ``file://`` store, and a real ``CacheServer`` on loopback serving the same store.

No FUSE and no S3 (tests/fuse/test_cache_group.py has the whole thing): what
is counted here is the reader's own UFS requests (``MeteredObjectStore``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from cloudfs.cache.disk import DiskBlockCache
from cloudfs.cache.interface import BlockAsk
from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.config import CacheConfig, S3Config
from cloudfs.data.blocks import ObjectRef
from cloudfs.data.prefetch import ReadCursor
from cloudfs.data.reader import ObjectReader
from cloudfs.metrics import Metrics
from cloudfs.peers.client import PeerGroup
from cloudfs.peers.health import MemberHealth
from cloudfs.peers.server import CacheServer
from cloudfs.peers.stores import StoreCache
from cloudfs.peers.worker import BlockWorker
from cloudfs.ufs.factory import store_id
from cloudfs.ufs.local import LocalObjectStore
from cloudfs.ufs.metered import MeteredObjectStore

BS = 64 * 1024


@dataclass
class Rig:
    ufs: Path
    server: CacheServer
    address: str

    @property
    def uri(self) -> str:
        return f"file://{self.ufs}"

    def put(self, key: str, data: bytes) -> ObjectRef:
        (self.ufs / key).write_bytes(data)
        info = LocalObjectStore(str(self.ufs)).head(key)
        return ObjectRef(key, info.etag, info.size)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    ufs = tmp_path / "ufs"
    ufs.mkdir()
    metrics = Metrics()
    worker = BlockWorker(
        StoreCache(S3Config(), metrics, allow_file=True),
        MemoryBlockCache(64 * BS, metrics),
        DiskBlockCache([str(tmp_path / "worker")], 256 * BS, metrics),
        metrics,
    )
    server = CacheServer(worker, "127.0.0.1:0", metrics)
    server.start()
    try:
        yield Rig(ufs, server, f"127.0.0.1:{server.port}")
    finally:
        server.stop(grace=0)


def read_whole(rig: Rig, refs: list[ObjectRef], metrics: Metrics, group: PeerGroup) -> list[bytes]:
    """Read each object start to end, as a sequential reader would (read-ahead on)."""
    store = MeteredObjectStore(LocalObjectStore(str(rig.ufs)), metrics)
    config = CacheConfig(cache_dir="/nonexistent", block_size=BS, memory_bytes=64 * BS)
    out: list[bytes] = []

    async def main() -> None:
        async with ObjectReader.running(
            store, MemoryBlockCache(config.memory_bytes, metrics), None, config, metrics,
            store_id(rig.uri), trio.CapacityLimiter(8), peers=group,
        ) as reader:  # fmt: skip
            for ref in refs:
                cursor = ReadCursor()
                chunks = [
                    bytes(await reader.read(ref, offset, 32 * 1024, cursor))
                    for offset in range(0, ref.size, 32 * 1024)
                ]
                out.append(b"".join(chunks))

    trio.run(main)
    return out


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_blocks_come_from_the_group_and_never_from_the_store(rig: Rig) -> None:
    data = {f"f{i}": os.urandom(5 * BS + 100 * i) for i in range(3)}  # streaming-size files
    refs = [rig.put(key, value) for key, value in data.items()]
    metrics = Metrics()
    group = PeerGroup([rig.address], rig.uri, metrics)
    try:
        assert read_whole(rig, refs, metrics, group) == list(data.values())
    finally:
        group.close()
    assert sample(metrics, "cloudfs_ufs_requests_total", op="get") == 0
    assert sample(metrics, "cloudfs_peer_bytes_total", member=rig.address) == sum(
        len(v) for v in data.values()
    )


def test_a_dead_group_costs_a_few_failed_calls_and_the_store_serves(rig: Rig) -> None:
    data = {f"g{i}": os.urandom(3 * BS + 7) for i in range(4)}
    refs = [rig.put(key, value) for key, value in data.items()]
    rig.server.stop(grace=0)
    metrics = Metrics()
    health = MemberHealth(first=60.0, longest=60.0)
    group = PeerGroup([rig.address], rig.uri, metrics, health=health)
    try:
        assert read_whole(rig, refs, metrics, group) == list(data.values())
    finally:
        group.close()
    # The calls already under way when the first one failed fail too (a read and its
    # read-ahead); after that the member is left out: nothing like one call per block.
    failed = sample(metrics, "cloudfs_peer_requests_total", member=rig.address, result="error")
    assert 1 <= failed <= 3 < 4 * len(refs)
    assert sample(metrics, "cloudfs_ufs_requests_total", op="get") >= len(refs)


def test_warm_up_takes_blocks_from_the_group(rig: Rig) -> None:
    data = os.urandom(9 * BS + 5)
    ref = rig.put("warm", data)
    metrics = Metrics()
    store = MeteredObjectStore(LocalObjectStore(str(rig.ufs)), metrics)
    config = CacheConfig(cache_dir="/nonexistent", block_size=BS, memory_bytes=64 * BS)
    group = PeerGroup([rig.address], rig.uri, metrics)

    async def main() -> None:
        async with ObjectReader.running(
            store, MemoryBlockCache(config.memory_bytes, metrics), None, config, metrics,
            store_id(rig.uri), trio.CapacityLimiter(8), peers=group,
        ) as reader:  # fmt: skip
            assert await reader.prefetch_whole(ref) == len(data)
            assert reader.cached_bytes(ref) == len(data)

    try:
        trio.run(main)
    finally:
        group.close()
    assert sample(metrics, "cloudfs_ufs_requests_total", op="get") == 0
    assert sample(metrics, "cloudfs_peer_bytes_total", member=rig.address) == len(data)


def test_a_hung_member_costs_one_deadline_then_is_left_out() -> None:
    with socket.socket() as hung:  # accepts connections (the backlog) and never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        member = f"127.0.0.1:{hung.getsockname()[1]}"
        metrics = Metrics()
        group = PeerGroup([member], "s3://bucket", metrics, deadline=0.5)
        asks = [BlockAsk("k", "etag", 4 * BS, BS, i, f"key-{i}", BS) for i in range(4)]
        try:
            started = time.monotonic()
            assert group.fetch(asks) == [None] * 4  # one batch: one deadline, not four
            first = time.monotonic() - started
            started = time.monotonic()
            assert group.fetch(asks) == [None] * 4  # left out: no call at all
            second = time.monotonic() - started
        finally:
            group.close()
    assert 0.4 <= first < 2.0 and second < 0.1, (first, second)
    assert sample(metrics, "cloudfs_peer_requests_total", member=member, result="error") == 4
