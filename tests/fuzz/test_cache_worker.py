"""Hostile requests to a cache worker (``GET /v1/block``): a proper 4xx, never a 5xx or a hang.

A real CacheServer on loopback over one memory store (every store URI opens it,
so no request leaves the process) holding one object. Each example sends one
raw HTTP/1.1 request: the block query with fields missing, repeated, empty,
negative, past int64, not numbers, not UTF-8 once decoded; random headers
(Content-Length that lies, odd Authorization); random bytes as the request
line. Then the worker must still serve the real block.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.config import S3Config
from cloudfs.metrics import Metrics
from cloudfs.peers import wire
from cloudfs.peers.server import CacheServer
from cloudfs.peers.stores import StoreCache
from cloudfs.peers.worker import BlockWorker
from testkit.memory_store import MemoryObjectStore
from tests.fuzz.strategies import FUZZ, TEXT, edge_ints

BS = 64 * 1024
STORE = "s3://fuzz/data"


@dataclass
class Worker:
    server: CacheServer
    port: int
    good: str  # the target of a block that is there


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    store = MemoryObjectStore()
    info = store.put_bytes("obj.bin", b"z" * (2 * BS + 5))
    metrics = Metrics()
    stores = StoreCache(S3Config(), metrics, opener=lambda uri, s3: store)
    blocks = BlockWorker(
        stores, MemoryBlockCache(8 * BS, metrics), MemoryBlockCache(8 * BS, metrics), metrics
    )
    server = CacheServer(blocks, "127.0.0.1:0", metrics, threads=4, idle_seconds=2.0)
    server.start()
    good = wire.Query(STORE, "obj.bin", info.etag, info.size, BS, 1).target()
    try:
        yield Worker(server, server.port, good)
    finally:
        server.stop(0)


def send(port: int, raw: bytes, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw`` and close our side; the status, headers and body of the first answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(raw)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # answered and closed before reading it all
        data = b""
        started = time.monotonic()
        with contextlib.suppress(ConnectionResetError):  # closed with our bytes unread
            while chunk := s.recv(65536):
                data += chunk
                assert time.monotonic() - started < timeout
    while data.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"):
        data = data[len(b"HTTP/1.1 100 Continue\r\n\r\n") :]
    if data and not data.startswith(b"HTTP/"):
        return -1, {}, data  # http.server's HTTP/0.9 answer to a request line it cannot place
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines[0] else 0
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return status, headers, body


def get(target: str, headers: dict[str, str] | None = None) -> bytes:
    lines = [f"GET {target} HTTP/1.1", "Host: worker", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")


def check(worker: Worker, raw: bytes) -> int:
    status, headers, _ = send(worker.port, raw)
    # 0: closed unanswered; -1: an HTTP/0.9 error page; 505: "HTTP/2.0" and up, which
    # http.server refuses itself
    assert status in (0, -1, 505) or 200 <= status < 500, f"{status} {headers}"
    assert send(worker.port, get(worker.good))[0] == 200, "the worker stopped serving"
    return status


VALUE = st.one_of(
    TEXT.map(lambda t: quote(t, safe="")),
    edge_ints(-(2**70), 2**70).map(str),
    st.sampled_from(["", "%ff", "%", "%zz", "1e9", "0x10", "\u0661", "²", " 1", "+1", "-0"]),
    st.binary(max_size=10).map(lambda b: quote(b, safe="")),
)
FIELDS = ["store_uri", "key", "etag", "object_size", "block_size", "index", "fill", "other"]


@FUZZ
@given(
    fields=st.lists(st.tuples(st.sampled_from(FIELDS), VALUE), max_size=9),
    base=st.booleans(),
)
def test_block_queries(worker: Worker, fields: list[tuple[str, str]], base: bool) -> None:
    query = "&".join(f"{k}={v}" for k, v in fields)
    if base:  # a valid query with fields changed or repeated after it
        query = worker.good.partition("?")[2] + ("&" + query if query else "")
    check(worker, get(f"{wire.BLOCK_PATH}?{query}"))


@FUZZ
@given(
    headers=st.dictionaries(
        st.sampled_from(["Authorization", "Content-Length", "Transfer-Encoding", "X-A", "Expect"]),
        st.one_of(
            TEXT.filter(lambda t: "\r" not in t and "\n" not in t), edge_ints(-1, 2**64).map(str)
        ),
        max_size=4,
    )
)
@example(headers={"Content-Length": "99999999999999999999"})
@example(headers={"Transfer-Encoding": "chunked"})
@example(headers={"X-A": "x" * 70_000})  # a header line past http.server's 64 KiB
def test_headers(worker: Worker, headers: dict[str, str]) -> None:
    check(worker, get(worker.good, headers))


@FUZZ
@given(raw=st.binary(max_size=200))
@example(raw=b"GET /v1/block?" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")
@example(raw=b"GET /v1/block?key=\xff\xfe HTTP/1.1\r\n\r\n")
@example(raw=b"GET " + b"/" * 10 + b" HTTP/9.9\r\n\r\n")
@example(raw=b"\r\n\r\n")
def test_raw_requests(worker: Worker, raw: bytes) -> None:
    check(worker, raw)


def test_a_client_past_its_connections_is_refused_and_others_served() -> None:
    store = MemoryObjectStore()
    metrics = Metrics()
    blocks = BlockWorker(
        StoreCache(S3Config(), metrics, opener=lambda uri, s3: store),
        MemoryBlockCache(BS, metrics), MemoryBlockCache(BS, metrics), metrics,
    )  # fmt: skip
    server = CacheServer(blocks, "127.0.0.1:0", metrics, max_connections_per_client=3)
    server.start()
    held: list[Any] = []
    try:
        for _ in range(3):  # idle keep-alive connections, each a thread
            held.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        time.sleep(0.2)
        status, _, _ = send(server.port, get("/v1/other"))
        assert status == 503
        for s in held:
            s.close()
        time.sleep(0.3)  # the worker sees them closed
        assert send(server.port, get("/v1/other"))[0] == 404  # its share is back
    finally:
        for s in held:
            s.close()
        server.stop(0)
