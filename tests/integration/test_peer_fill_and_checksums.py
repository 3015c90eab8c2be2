"""Two things a cache-group call carries besides the block: the CRC-32 the caller checks
(a reply whose bytes do not match it is refused, never cached), and ``fill=1``
(warm-up through the group: the owner holds the block, no bytes come back).

Real HTTP on loopback: a real ``CacheServer`` over a ``file://`` store (the ``rig``
of test_peer_reads.py), and for the torn reply a server that lies about its bytes.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import trio

from cloudfs.cache.interface import BlockAsk
from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.config import CacheConfig
from cloudfs.data.blocks import block_key
from cloudfs.data.reader import ObjectReader
from cloudfs.metrics import Metrics
from cloudfs.peers import wire
from cloudfs.peers.client import PeerGroup
from cloudfs.ufs.factory import store_id
from cloudfs.ufs.local import LocalObjectStore
from cloudfs.ufs.metered import MeteredObjectStore
from tests.integration import test_peer_reads as shared
from tests.integration.test_peer_reads import BS, Rig, sample

rig = shared.rig  # the fixture: a CacheServer over a file:// store, on loopback


class _Liar(BaseHTTPRequestHandler):
    """Every reply has the right length and a flipped byte, under the good CRC-32."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        good = bytes(BS)
        torn = b"\1" + good[1:]
        self.send_response(200)
        self.send_header("Content-Length", str(len(torn)))
        self.send_header(wire.SOURCE_HEADER, "disk")
        self.send_header(wire.CRC_HEADER, str(zlib.crc32(good)))
        self.end_headers()
        self.wfile.write(torn)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def liar() -> Iterator[str]:
    """A block server whose every reply has the right length and a flipped byte."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Liar)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_block_whose_bytes_do_not_match_its_checksum_is_refused(liar: str) -> None:
    metrics = Metrics()
    group = PeerGroup([liar], "s3://bucket", metrics)
    asks = [BlockAsk("k", "etag", 2 * BS, BS, i, f"key-{i}", BS) for i in range(2)]
    try:
        assert group.fetch(asks) == [None, None]
    finally:
        group.close()
    assert sample(metrics, "cloudfs_peer_requests_total", member=liar, result="error") == 2
    assert sample(metrics, "cloudfs_peer_bytes_total", member=liar) == 0
    assert group.view() == [{"member": liar, "up": True}]  # it answered: not left out


def test_fill_makes_the_owner_hold_blocks_without_sending_them(rig: Rig) -> None:
    data = os.urandom(5 * BS + 11)
    ref = rig.put("fill", data)
    metrics = Metrics()
    group = PeerGroup([rig.address], rig.uri, metrics)
    salt = store_id(rig.uri)
    asks = [
        BlockAsk(ref.key, ref.etag, ref.size, BS, i, block_key(salt, ref, i, BS), BS)
        for i in range(6)
    ]
    asks[-1] = BlockAsk(ref.key, ref.etag, ref.size, BS, 5, asks[-1].cache_key, 11)
    try:
        assert group.fill(asks) == ["origin"] * 6
        assert group.fill(asks) == ["memory"] * 6  # held now: not fetched again
        assert b"".join(b or b"" for b in group.fetch(asks)) == data
    finally:
        group.close()
    assert sample(metrics, "cloudfs_peer_bytes_total", member=rig.address) == len(data)


def test_warm_in_group_leaves_no_copy_here_and_warms_here_what_no_owner_takes(
    rig: Rig,
) -> None:
    data = os.urandom(9 * BS + 5)
    ref = rig.put("warm", data)
    metrics = Metrics()
    store = MeteredObjectStore(LocalObjectStore(str(rig.ufs)), metrics)
    config = CacheConfig(cache_dir="/nonexistent", block_size=BS, memory_bytes=64 * BS)
    group = PeerGroup([rig.address], rig.uri, metrics)

    async def warm() -> tuple[tuple[int, int], int]:
        async with ObjectReader.running(
            store, MemoryBlockCache(config.memory_bytes, metrics), None, config, metrics,
            store_id(rig.uri), trio.CapacityLimiter(8), peers=group,
        ) as reader:  # fmt: skip
            assert reader.in_group
            return await reader.warm_in_group(ref), reader.cached_bytes(ref)

    try:
        assert trio.run(warm) == ((len(data), 0), 0)  # the owner fetched it all; nothing here
        assert sample(metrics, "cloudfs_ufs_requests_total", op="get") == 0
        assert trio.run(warm) == ((0, 0), 0)  # held by the owner already
        rig.server.stop(grace=0)  # the owner is gone: this mount warms the file itself
        assert trio.run(warm) == ((0, len(data)), len(data))
    finally:
        group.close()
    assert sample(metrics, "cloudfs_ufs_requests_total", op="get") >= 1
