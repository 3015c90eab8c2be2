"""The block wire itself (cloudfs/peers/wire.py): keys of any UTF-8, keep-alive
connections the worker closed, one origin GET for many callers, and what a
worker answers to what is not a block GET.

Real HTTP on loopback: the ``rig`` of test_peer_reads.py (a ``CacheServer`` over a
``file://`` store), or one built here where the test needs its knobs.
"""

from __future__ import annotations

import errno
import http.client
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cloudfs.cache.interface import BlockAsk
from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.config import S3Config
from cloudfs.data.blocks import ObjectRef
from cloudfs.metrics import Metrics
from cloudfs.peers import wire
from cloudfs.peers.client import PeerGroup
from cloudfs.peers.server import CacheServer
from cloudfs.peers.stores import StoreCache
from cloudfs.peers.worker import BlockWorker
from tests.integration import test_peer_reads as shared
from tests.integration.test_peer_reads import BS, Rig, sample

rig = shared.rig  # the fixture: a CacheServer over a file:// store, on loopback

KEYS = ["a b.bin", "a+b.bin", "100%.bin", "%2B+%20.bin", "données/日本語 ü+%.bin"]


def asks_of(ref: ObjectRef) -> list[BlockAsk]:
    count = (ref.size + BS - 1) // BS
    return [
        BlockAsk(ref.key, ref.etag, ref.size, BS, i, f"{ref.key}#{i}", min(BS, ref.size - i * BS))
        for i in range(count)
    ]


def get(address: str, target: str, method: str = "GET") -> tuple[int, str | None, bytes]:
    host, _, port = address.rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, target)
        response = conn.getresponse()
        return response.status, response.getheader(wire.ERRNO_HEADER), response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("key", KEYS)
def test_a_key_of_any_utf8_comes_back_as_it_was(rig: Rig, key: str) -> None:
    (rig.ufs / key).parent.mkdir(parents=True, exist_ok=True)
    data = os.urandom(2 * BS + 3)
    ref = rig.put(key, data)
    query = wire.Query(rig.uri, key, ref.etag, ref.size, BS, 1)
    assert wire.Query.parse(query.target().partition("?")[2]) == query
    metrics = Metrics()
    group = PeerGroup([rig.address], rig.uri, metrics)
    try:
        assert b"".join(b or b"" for b in group.fetch(asks_of(ref))) == data
    finally:
        group.close()
    assert sample(metrics, "cloudfs_peer_requests_total", member=rig.address, result="error") == 0


def test_what_is_not_a_block_get_is_answered_without_an_errno(rig: Rig) -> None:
    assert get(rig.address, "/v1/other")[:2] == (404, None)
    assert get(rig.address, "/v1/block?key=x", "POST")[:2] == (405, None)
    status, number, body = get(rig.address, "/v1/block?key=x")  # a block, badly named
    assert (status, number) == (400, str(errno.EINVAL))
    assert body.count(b"\n") == 1  # one line
    bad_utf8 = wire.Query(rig.uri, "k", "e", 1, BS, 0).target().replace("key=k", "key=%FF")
    assert get(rig.address, bad_utf8)[:2] == (400, str(errno.EINVAL))


@pytest.fixture
def quick_idle(tmp_path: Path) -> Iterator[tuple[Rig, Metrics]]:
    """A worker that closes a keep-alive connection after 0.2 s without a request."""
    ufs = tmp_path / "ufs"
    ufs.mkdir()
    metrics = Metrics()
    worker = BlockWorker(
        StoreCache(S3Config(), metrics, allow_file=True),
        MemoryBlockCache(64 * BS, metrics),
        MemoryBlockCache(64 * BS, metrics, tier="disk"),
        metrics,
    )
    server = CacheServer(worker, "127.0.0.1:0", metrics, idle_seconds=0.2)
    server.start()
    try:
        yield Rig(ufs, server, f"127.0.0.1:{server.port}"), metrics
    finally:
        server.stop(grace=0)


def test_a_connection_the_worker_closed_while_idle_is_opened_again_unnoticed(
    quick_idle: tuple[Rig, Metrics],
) -> None:
    """Calls one at a time run on one pool thread, on one kept connection: after the
    worker closed it, the next call finds it closed, and is sent again on a new one
    (once), neither counted as an error nor backing the member off."""
    rig, _ = quick_idle
    data = os.urandom(BS)
    ref = rig.put("idle", data)
    metrics = Metrics()
    group = PeerGroup([rig.address], rig.uri, metrics)
    try:
        for _ in range(3):
            assert group.fetch(asks_of(ref)) == [data]
            time.sleep(0.4)  # the worker closes the idle connection meanwhile
    finally:
        group.close()
    assert sample(metrics, "cloudfs_peer_requests_total", member=rig.address, result="error") == 0
    assert sample(metrics, "cloudfs_peer_backoffs_total", member=rig.address) == 0


def test_a_restarted_worker_is_used_again_on_new_connections(rig: Rig) -> None:
    data = os.urandom(BS)
    ref = rig.put("again", data)
    metrics = Metrics()
    group = PeerGroup([rig.address], rig.uri, metrics)
    try:
        assert group.fetch(asks_of(ref)) == [data]
        rig.server.stop(grace=0)  # closes the kept connection too
        rig.server = CacheServer(rig.server._worker, rig.address, Metrics())
        rig.server.start()
        assert group.fetch(asks_of(ref)) == [data]
    finally:
        group.close()
    assert sample(metrics, "cloudfs_peer_requests_total", member=rig.address, result="error") == 0


def test_eight_callers_of_one_cold_block_cause_one_origin_get(
    quick_idle: tuple[Rig, Metrics],
) -> None:
    rig, worker_metrics = quick_idle
    data = os.urandom(3 * BS)
    ref = rig.put("cold", data)
    target = wire.Query(rig.uri, ref.key, ref.etag, ref.size, BS, 1).target()
    start = threading.Barrier(8)

    def one(_: int) -> tuple[int, str | None, bytes]:
        start.wait()
        return get(rig.address, target)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, range(8)))
    assert answers == [(200, None, data[BS : 2 * BS])] * 8
    assert sample(worker_metrics, "cloudfs_ufs_requests_total", op="get") == 1


def test_a_second_server_on_a_port_in_use_fails(rig: Rig) -> None:
    with pytest.raises(OSError) as info:
        CacheServer(rig.server._worker, rig.address, Metrics())
    assert info.value.errno == errno.EADDRINUSE


def test_a_member_removed_and_added_again_is_asked_on_fresh_connections(rig: Rig) -> None:
    data = os.urandom(BS)
    ref = rig.put("churn", data)
    metrics = Metrics()
    group = PeerGroup([rig.address], rig.uri, metrics)
    try:
        assert group.fetch(asks_of(ref)) == [data]
        assert group.update([])  # its connection is closed by its thread, later
        assert group.fetch(asks_of(ref)) == [None]  # nobody to ask: the UFS
        assert group.update([rig.address])
        assert group.fetch(asks_of(ref)) == [data]
    finally:
        group.close()
    assert group.fetch(asks_of(ref)) == [None]  # closed: never the reader's problem
    assert sample(metrics, "cloudfs_peer_backoffs_total", member=rig.address) == 0


class _Boaster(BaseHTTPRequestHandler):
    """Says its reply is larger than any block, then sends a few bytes."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(wire.MAX_BLOCK_BYTES + 1))
        self.end_headers()
        self.wfile.write(b"x" * 100)
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_reply_larger_than_any_block_is_not_read() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Boaster)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    member = f"127.0.0.1:{server.server_address[1]}"
    metrics = Metrics()
    group = PeerGroup([member], "s3://bucket", metrics, deadline=5.0)
    try:
        started = time.monotonic()
        assert group.fetch([BlockAsk("k", "e", BS, BS, 0, "key", BS)]) == [None]
        assert time.monotonic() - started < 1.0  # refused at the header, not timed out
    finally:
        group.close()
        server.shutdown()
        server.server_close()
    assert sample(metrics, "cloudfs_peer_backoffs_total", member=member) == 1


class _SlowStore:
    """A store whose every ranged GET takes ``delay`` seconds: an origin far slower
    than a caller's read timeout."""

    def __init__(self, inner: Any, delay: float) -> None:
        self._inner = inner
        self._delay = delay

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_range(self, key: str, offset: int, length: int, etag: str | None = None) -> bytes:
        time.sleep(self._delay)
        data: bytes = self._inner.get_range(key, offset, length, etag)
        return data


def test_a_worker_fetching_behind_a_slow_origin_is_waited_for_not_left_out(
    tmp_path: Path,
) -> None:
    """Silent for the deadline: left out; fetching for 3 deadlines, ticking: waited for."""
    from cloudfs.ufs.local import LocalObjectStore

    ufs = tmp_path / "ufs"
    ufs.mkdir()
    data = os.urandom(2 * BS)
    (ufs / "slow").write_bytes(data)
    info = LocalObjectStore(str(ufs)).head("slow")
    metrics = Metrics()
    stores = StoreCache(
        S3Config(), metrics, allow_file=True,
        opener=lambda uri, s3: _SlowStore(LocalObjectStore(str(ufs)), delay=3.0),
    )  # fmt: skip
    worker = BlockWorker(stores, MemoryBlockCache(8 * BS, metrics), MemoryBlockCache(0, metrics),
                         metrics)  # fmt: skip
    server = CacheServer(worker, "127.0.0.1:0", metrics)
    server.start()
    address = f"127.0.0.1:{server.port}"
    mount_metrics = Metrics()
    group = PeerGroup([address], f"file://{ufs}", mount_metrics, deadline=1.0)  # 2x a tick
    asks = [BlockAsk("slow", info.etag, info.size, BS, i, f"slow-{i}", BS) for i in range(2)]
    try:
        started = time.monotonic()
        assert group.fetch(asks) == [data[:BS], data[BS:]]  # both fetched at once, 3 s
        assert time.monotonic() - started < 10
        assert group.fill(asks) == ["memory", "memory"]
    finally:
        group.close()
        server.stop(grace=0)
    assert sample(mount_metrics, "cloudfs_peer_backoffs_total", member=address) == 0
    assert sample(mount_metrics, "cloudfs_peer_requests_total", member=address, result="miss") == 2
    assert sample(metrics, "cloudfs_ufs_requests_total", op="get") == 2
