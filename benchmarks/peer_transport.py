"""Which transport a cache group's block transfer should use: measured, on loopback.

One cached 4 MiB block (the default --block-size) is sent from a server process
to this one, repeatedly, over each candidate the issue names:

* ``grpc-unary``: one GetBlock call, the block in one message (cloudfs/peers used it first,
  with its message-size options);
* ``grpc-stream``: a server-streaming call, the block in 1 MiB messages;
* ``http-range``: plain HTTP/1.1, a keep-alive connection per client thread, the
  block as one response body (``http.server`` + ``http.client``);
* ``framed-socket``: a persistent TCP connection per thread, an 8-byte request
  and a length-prefixed reply read with ``recv_into``.

For each: the median time of one block with one caller (latency), and the
aggregate rate of 8 callers at once (throughput), over ``--blocks`` blocks
each. The servers hold the block in memory (a cache hit), so what differs is
the transport and its Python cost. The server runs in a child process, as a
worker does.

    python3 benchmarks/peer_transport.py [--blocks 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import socket
import socketserver
import statistics
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc

MiB = 1024 * 1024
# gRPC refuses messages over 4 MiB by default (what cloudfs/peers/wire.py raised them to
# while blocks went over gRPC).
MESSAGE_OPTIONS = [
    ("grpc.max_send_message_length", 65 * MiB),
    ("grpc.max_receive_message_length", 65 * MiB),
]
BLOCK = 4 * MiB
CHUNK = MiB
THREADS = 8
_FRAME = struct.Struct(">Q")
_UNARY = "/bench.Blocks/Get"
_STREAM = "/bench.Blocks/Stream"


# -- servers (in the child process) ------------------------------------------------------


def _serve_grpc(block: bytes, port: int) -> None:
    def get(request: bytes, context: grpc.ServicerContext) -> bytes:
        return block

    def stream(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        for start in range(0, len(block), CHUNK):
            yield block[start : start + CHUNK]

    server = grpc.server(futures.ThreadPoolExecutor(16), options=MESSAGE_OPTIONS)
    handlers = {
        "Get": grpc.unary_unary_rpc_method_handler(get),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Blocks", handlers),)
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


def _serve_http(block: bytes, port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(206)
            self.send_header("Content-Length", str(len(block)))
            self.send_header("Content-Range", f"bytes 0-{len(block) - 1}/{len(block)}")
            self.end_headers()
            self.wfile.write(block)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def _serve_framed(block: bytes, port: int) -> None:
    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            conn: socket.socket = self.request
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while conn.recv(8):  # an 8-byte request (the block's index)
                conn.sendall(_FRAME.pack(len(block)) + block)

    class Server(socketserver.ThreadingTCPServer):
        allow_reuse_address = True
        daemon_threads = True

    Server(("127.0.0.1", port), Handler).serve_forever()


def _servers(block_size: int, ports: dict[str, int]) -> None:
    block = os.urandom(block_size)
    threading.Thread(target=_serve_http, args=(block, ports["http"]), daemon=True).start()
    threading.Thread(target=_serve_framed, args=(block, ports["framed"]), daemon=True).start()
    _serve_grpc(block, ports["grpc"])


# -- clients ---------------------------------------------------------------------------


Fetch = Callable[[], int]


def _grpc_clients(port: int) -> tuple[Callable[[], Fetch], Callable[[], Fetch]]:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=MESSAGE_OPTIONS)
    unary = channel.unary_unary(_UNARY)
    stream = channel.unary_stream(_STREAM)

    def unary_fetch() -> Fetch:
        return lambda: len(unary(b"\0" * 8, timeout=30))

    def stream_fetch() -> Fetch:
        return lambda: sum(len(part) for part in stream(b"\0" * 8, timeout=30))

    return unary_fetch, stream_fetch


def _http_fetch(port: int) -> Fetch:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def fetch() -> int:
        conn.request("GET", "/block", headers={"Range": f"bytes=0-{BLOCK - 1}"})
        return len(conn.getresponse().read())

    return fetch


def _framed_fetch(port: int) -> Fetch:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    header = bytearray(_FRAME.size)

    def fetch() -> int:
        sock.sendall(b"\0" * 8)
        _recv_exact(sock, memoryview(header))
        (length,) = _FRAME.unpack(header)
        body = bytearray(length)
        _recv_exact(sock, memoryview(body))
        return len(bytes(body))  # the bytes object a caller keeps, as the others hand over

    return fetch


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            raise ConnectionError("server closed the connection")
        got += n


def _latency(make: Callable[[], Fetch], blocks: int) -> float:
    fetch = make()
    fetch()  # connect, warm up
    times = []
    for _ in range(blocks):
        started = time.perf_counter()
        assert fetch() == BLOCK
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _throughput(make: Callable[[], Fetch], blocks: int) -> float:
    fetchers = [make() for _ in range(THREADS)]
    for fetch in fetchers:
        fetch()
    barrier = threading.Barrier(THREADS + 1)

    def run(fetch: Fetch) -> None:
        barrier.wait()
        for _ in range(blocks):
            assert fetch() == BLOCK

    with futures.ThreadPoolExecutor(THREADS) as pool:
        done = [pool.submit(run, f) for f in fetchers]
        barrier.wait()
        started = time.perf_counter()
        for f in done:
            f.result()
        elapsed = time.perf_counter() - started
    return THREADS * blocks * BLOCK / elapsed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=100, help="blocks per caller (100)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats; medians (3)")
    parser.add_argument("--json", help="also write the raw results here")
    args = parser.parse_args()
    ports = {"grpc": _free_port(), "http": _free_port(), "framed": _free_port()}
    server = multiprocessing.get_context("spawn").Process(
        target=_servers, args=(BLOCK, ports), daemon=True
    )
    server.start()
    try:
        for port in ports.values():
            _wait_listening(port)
        unary, stream = _grpc_clients(ports["grpc"])
        candidates: dict[str, Callable[[], Fetch]] = {
            "grpc-unary": unary,
            "grpc-stream": stream,
            "http-range": lambda: _http_fetch(ports["http"]),
            "framed-socket": lambda: _framed_fetch(ports["framed"]),
        }
        raw: dict[str, dict[str, list[float]]] = {
            name: {"latency_s": [], "rate_bps": []} for name in candidates
        }
        for _ in range(args.repeats):
            for name, make in candidates.items():  # interleaved: noise hits every one alike
                raw[name]["latency_s"].append(_latency(make, args.blocks))
                raw[name]["rate_bps"].append(_throughput(make, max(args.blocks // 4, 5)))
    finally:
        server.kill()
    print(f"4 MiB block over loopback, {os.cpu_count()} CPUs, medians of {args.repeats}:")
    print(
        f"{'transport':<15}{'1 caller: ms/block':>20}{'MiB/s':>9}{f'{THREADS} callers: MiB/s':>22}"
    )
    for name, r in raw.items():
        latency = statistics.median(r["latency_s"])
        rate = statistics.median(r["rate_bps"])
        print(f"{name:<15}{latency * 1e3:>20.2f}{BLOCK / latency / MiB:>9.0f}{rate / MiB:>22.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
