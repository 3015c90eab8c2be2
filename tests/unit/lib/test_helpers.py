"""cloudfs/lib: the JSON-lines framing and client, the HTTP server base, serve_until_signal;
and the block wire's reply reader (peers/reply.py) that both block callers share."""

from __future__ import annotations

import errno
import http.client
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote

import pytest

from cloudfs.errors import FsError, StartupError
from cloudfs.lib import jsonlines
from cloudfs.lib.http_server import ConnectionHandler, ThreadedHTTPServer
from cloudfs.lib.jsonlines import ChannelError, JsonLinesClient, LineBuffer
from cloudfs.lib.serve import serve_until_signal
from cloudfs.peers import reply, wire

# -- the framing ------------------------------------------------------------------


def test_line_buffer_splits_across_chunks_and_bounds_a_line() -> None:
    lines = LineBuffer(limit=8)
    lines.feed(b'{"a"')
    assert lines.line() is None
    lines.feed(b":1}\n{}\nta")
    assert lines.line() == b'{"a":1}'
    assert lines.line() == b"{}"
    assert lines.line() is None
    assert lines.rest() == b"ta"
    lines.feed(b"x" * 9)
    with pytest.raises(ValueError, match="too long"):
        lines.line()


def test_decode_refuses_anything_but_an_object() -> None:
    assert jsonlines.decode(jsonlines.encode({"op": "x"})) == {"op": "x"}
    for line in (b"[1]\n", b"1\n", b"[" * 100_000 + b"\n", b"\xff\n"):
        with pytest.raises(ValueError):
            jsonlines.decode(line)


def test_an_error_line_is_an_fs_error_of_its_errno() -> None:
    assert jsonlines.failure(jsonlines.done({"x": 1})) is None
    refused = jsonlines.failure(jsonlines.error("gone", errno.ENOENT))
    assert isinstance(refused, FsError) and refused.errno == errno.ENOENT
    for bad in ("2", None, True, -1, 10**9):
        failed = jsonlines.failure({"error": "x", "errno": bad})
        assert failed is not None and failed.errno == errno.EIO


# -- the client -------------------------------------------------------------------


@contextmanager
def unix_server(path: Path, answer: Callable[[socket.socket], None]) -> Iterator[None]:
    """Accept connections on ``path``; each gets ``answer`` after its first line."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(4)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.makefile("rb").readline()
                answer(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(5)


def test_client_reads_events_then_the_final_line(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    lines = [{"event": 0}, {"event": 1}, jsonlines.done({"n": 2})]
    with unix_server(path, lambda c: c.sendall(b"".join(map(jsonlines.encode, lines)))):
        with JsonLinesClient(path, timeout=5, peer="the server") as channel:
            channel.send({"op": "x"})
            assert list(channel.events()) == lines
        with JsonLinesClient(path, timeout=5, peer="the server") as channel:
            channel.send({"op": "x"})
            assert channel.reply() == {"done": True, "n": 2}


@pytest.mark.parametrize(
    ("sent", "raised", "match"),
    [
        (jsonlines.encode(jsonlines.error("no such", errno.ENOENT)), FsError, "no such"),
        (b"not json\n", ChannelError, "the server sent a garbled answer"),
        (b"", ChannelError, "the server closed the connection without an answer"),
    ],
)
def test_client_failures(tmp_path: Path, sent: bytes, raised: type[Exception], match: str) -> None:
    path = tmp_path / "s.sock"
    with (
        unix_server(path, lambda c: c.sendall(sent)),
        JsonLinesClient(path, timeout=5, peer="the server") as channel,
    ):
        channel.send({"op": "x"})
        with pytest.raises(raised, match=match) as info:
            channel.reply()
    if raised is FsError:
        assert getattr(info.value, "errno", None) == errno.ENOENT


def test_client_timeouts_and_no_server(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        JsonLinesClient(tmp_path / "none", timeout=1, peer="the server")
    path = tmp_path / "silent.sock"
    with socket.socket(socket.AF_UNIX) as silent:
        silent.bind(str(path))
        silent.listen(1)
        with JsonLinesClient(path, timeout=0.2, peer="the server") as channel:
            channel.send({"op": "x"})
            with pytest.raises(ChannelError, match=r"gave no answer within 0\.2 s") as info:
                channel.read()
    assert isinstance(info.value, StartupError)


def test_client_refuses_a_request_past_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with (
        unix_server(path, lambda c: None),
        JsonLinesClient(path, timeout=5, peer="the server") as channel,
        pytest.raises(FsError) as info,
    ):
        channel.send({"x": "y" * jsonlines.MAX_LINE})
    assert info.value.errno == errno.EMSGSIZE


# -- serve_until_signal -------------------------------------------------------------


class Service:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def start(self) -> None:
        self.log.append(f"start {self.name}")

    def stop(self) -> None:
        self.log.append(f"stop {self.name}")


def test_serve_until_signal_stops_in_reverse_order() -> None:
    saved = {n: signal.getsignal(n) for n in (signal.SIGTERM, signal.SIGINT)}
    log: list[str] = []
    try:
        serve_until_signal(
            Service("server", log),
            Service("heartbeat", log),
            ready=lambda: os.kill(os.getpid(), signal.SIGTERM),
        )
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)
    assert log == ["start server", "start heartbeat", "stop heartbeat", "stop server"]


# -- the HTTP server base and the block reply reader -------------------------------


class _Headers(ConnectionHandler):
    """Answers every GET with the headers its path names: /CRC/ERRNO."""

    def do_GET(self) -> None:
        _, crc, number = unquote(self.path).split("/")
        self.send_response(200 if number == "-" else 404)
        self.send_header(wire.CRC_HEADER, crc)
        if number != "-":
            self.send_header(wire.ERRNO_HEADER, number)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


@pytest.fixture
def header_server() -> Iterator[ThreadedHTTPServer]:
    server = ThreadedHTTPServer("127.0.0.1:0", _Headers, name="t", threads=2, idle_seconds=5)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_reply_headers_count_only_as_ascii_digits(header_server: ThreadedHTTPServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", header_server.port, timeout=5)
    dropped: list[http.client.HTTPConnection] = []
    calls = 0

    def connect() -> tuple[http.client.HTTPConnection, bool]:
        nonlocal calls
        calls += 1
        return conn, calls > 1

    try:
        got = reply.get(connect, dropped.append, "/123/-")
        assert (got.status, got.data, got.crc32, got.errno) == (200, b"ok", 123, None)
        got = reply.get(connect, dropped.append, "/%C2%B2/%C2%B2")  # '²': a digit, not ASCII
        assert (got.status, got.crc32, got.errno) == (404, None, None)
        got = reply.get(connect, dropped.append, "/7/2")
        assert (got.crc32, got.errno) == (7, 2)
    finally:
        conn.close()
    assert not dropped


def test_server_refuses_a_client_past_its_connections() -> None:
    server = ThreadedHTTPServer(
        "127.0.0.1:0", _Headers, name="t", threads=2, idle_seconds=5, max_connections_per_client=1
    )
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as first:
            first.sendall(b"GET /1/- HTTP/1.1\r\nHost: x\r\n\r\n")
            assert first.recv(100).startswith(b"HTTP/1.1 200")
            with socket.create_connection(("127.0.0.1", server.port)) as second:
                assert second.recv(100).startswith(b"HTTP/1.1 503")
    finally:
        server.stop()


def test_no_tls_on_a_unix_socket(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="no TLS"):
        ThreadedHTTPServer(
            str(tmp_path / "s.sock"), _Headers, name="t", threads=1, idle_seconds=1,
            tls=object(),  # type: ignore[arg-type]
        )  # fmt: skip
