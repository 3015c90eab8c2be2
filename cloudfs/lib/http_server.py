"""``ThreadedHTTPServer``: the HTTP/1.1 server under the cache worker and the S3 gateway.

What both share; each keeps only its handler (a ``ConnectionHandler``):

* One thread per connection (``http.server.ThreadingHTTPServer``), keep-alive,
  TCP_NODELAY; an idle connection is closed after ``idle_seconds`` so a client
  that went away pins no thread.
* ``threads`` bounds the requests served at once (``slot()``: a semaphore), not
  the connections: an idle keep-alive connection must not hold up another
  client's request. Each client host may hold at most
  ``max_connections_per_client`` connections (0: no limit), so one cannot take
  a thread per connection without end; past that it is answered 503 and closed
  (``refused_connection`` counts it).
* ``tls``: every connection is TLS (``cloudfs/tls.py``), its handshake done in
  the connection's thread, where a failed one ends that connection only.
* The address is HOST:PORT ([v6]:PORT; port 0 picks one: ``port``) or the
  absolute path of a UNIX socket, created 0600 (the serving process's user
  only; a stale one of a killed process replaced) and removed when the server
  stops; no TLS there.
* ``stop(grace)`` stops accepting, lets the requests under way finish for up to
  ``grace`` seconds, then closes every connection (a keep-alive one included:
  ``shutdown`` alone only stops accepting).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cloudfs.tls import ServerTLS, handshake

log = logging.getLogger(__name__)

BUSY = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"


class Listener(ThreadingHTTPServer):
    """The socket and its connection threads; knows the open connections so that
    ``stop`` can end keep-alive ones too, and counts them per client host."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int] | str,
        family: socket.AddressFamily,
        handler: type[ConnectionHandler],
    ) -> None:
        self.address_family = family
        self.open: set[socket.socket] = set()
        self.open_lock = threading.Lock()
        self.per_client: dict[str, int] = {}  # open connections per client host
        self.owner: ThreadedHTTPServer | None = None  # set by the server that serves it
        super().__init__(address, handler)  # type: ignore[arg-type]  # AF_UNIX: a path

    def process_request(self, request: Any, client_address: Any) -> None:
        """Start the connection's thread, unless its client holds its share already:
        then a 503 without an errno (the caller asks elsewhere for now) and close."""
        client = str(client_address[0]) if client_address else ""
        limit = self.owner.max_connections_per_client if self.owner is not None else 0
        with self.open_lock:
            held = self.per_client.get(client, 0)
            if limit and client and held >= limit:
                held = -1
            else:
                self.per_client[client] = held + 1
        if held < 0:  # counted, not logged: a flood would fill the log
            if self.owner is not None:
                self.owner.refused_connection()
            with contextlib.suppress(OSError):
                request.sendall(BUSY)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread: nothing else will give the share back
            self._release(client)
            raise

    def _release(self, client: str) -> None:
        with self.open_lock:
            self.per_client[client] -= 1
            if not self.per_client[client]:
                del self.per_client[client]

    def server_bind(self) -> None:
        # HTTPServer's would look the host up in DNS (getfqdn): not needed, maybe slow.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self.open_lock:
            self.open.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.open_lock:
                self.open.discard(request)
            self._release(str(client_address[0]) if client_address else "")

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s ended", client_address, exc_info=True)

    def drop_connections(self) -> None:
        with self.open_lock:
            sockets = list(self.open)
        for s in sockets:
            with contextlib.suppress(OSError):  # wakes the thread blocked reading it
                s.shutdown(socket.SHUT_RDWR)


class UnixListener(Listener):
    """The listener on a UNIX socket file: made 0600 (the serving process's user only,
    as a mount's control socket), a stale one of a killed process replaced, the file
    removed when closed."""

    def __init__(self, path: str, handler: type[ConnectionHandler]) -> None:
        self.path = Path(path)
        super().__init__(path, socket.AF_UNIX, handler)

    def server_bind(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        old_umask = os.umask(0o177)  # no moment where another user may connect
        try:
            self.socket.bind(str(self.path))
        finally:
            os.umask(old_umask)
        self.path.chmod(0o600)
        self.server_name, self.server_port = str(self.path), 0

    def server_close(self) -> None:
        super().server_close()
        self.path.unlink(missing_ok=True)


def listen(address: str, handler: type[ConnectionHandler]) -> Listener:
    """The listener of ``address``: an absolute path is a UNIX socket, else HOST:PORT
    (``OSError``: EINVAL for neither, EADDRINUSE...)."""
    if address.startswith("/"):
        return UnixListener(address, handler)
    host, sep, port = address.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit():
        raise OSError(errno.EINVAL, f"cannot listen on {address}: not HOST:PORT")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return Listener((host, int(port)), family, handler)


class ThreadedHTTPServer:
    """Serves ``handler`` on ``address``: ``start()`` in a thread, ``stop()`` ends it.
    Subclasses add what their handler asks of them (``handler.owner``)."""

    def __init__(
        self,
        address: str,
        handler: type[ConnectionHandler],
        *,
        name: str,
        threads: int,
        idle_seconds: float,
        tls: ServerTLS | None = None,
        max_connections_per_client: int = 0,
    ) -> None:
        """``name``: the serving thread's; ``threads``: requests served at once
        (``slot``); ``idle_seconds``: how long a keep-alive connection may wait for its
        next request; ``tls``: serve TLS (not on a UNIX socket);
        ``max_connections_per_client``: connections open at once per client host (0:
        no limit; a UNIX socket's callers are not counted). ``OSError`` (EADDRINUSE...)
        if it cannot listen."""
        if tls is not None and address.startswith("/"):
            raise OSError(errno.EINVAL, f"no TLS on a UNIX socket ({address})")
        self.idle_seconds = idle_seconds
        self.max_connections_per_client = max_connections_per_client
        self._name = name
        self._slots = threading.BoundedSemaphore(threads)
        self._busy = 0
        self._busy_lock = threading.Condition()
        self._listener = listen(address, handler)
        if tls is not None:
            self._listener.socket = tls.wrap_listener(self._listener.socket)
        self._listener.owner = self
        bound = self._listener.server_address
        self.port: int = bound[1] if isinstance(bound, tuple) else 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._listener.serve_forever, name=self._name, daemon=True
        )
        self._thread.start()

    def stop(self, grace: float = 2.0) -> None:
        """Stop accepting, give the requests under way ``grace`` seconds, then close
        every connection (a client on one finds it closed)."""
        if self._thread is not None:
            self._listener.shutdown()
            self._thread.join()
            self._thread = None
        self._listener.server_close()
        deadline = time.monotonic() + grace
        with self._busy_lock:
            while self._busy and time.monotonic() < deadline:
                self._busy_lock.wait(min(0.1, max(0.0, deadline - time.monotonic())))
        self._listener.drop_connections()

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """One request served: it waits for one of ``threads`` slots, and ``stop``
        waits for it."""
        with self._busy_lock:
            self._busy += 1
        try:
            with self._slots:
                yield
        finally:
            with self._busy_lock:
                self._busy -= 1
                self._busy_lock.notify_all()

    def refused_connection(self) -> None:
        """A connection past ``max_connections_per_client`` was answered 503 (metrics)."""


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str) -> None:
    """A whole response: status, type, length, body (the small JSON and text servers')."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class ConnectionHandler(BaseHTTPRequestHandler):
    """One connection: its requests one after the other (HTTP/1.1 keep-alive)."""

    protocol_version = "HTTP/1.1"
    sys_version = ""
    disable_nagle_algorithm = False  # set in setup, for TCP only
    server: Listener

    @property
    def owner(self) -> ThreadedHTTPServer:
        """The server this connection belongs to."""
        owner = self.server.owner
        assert owner is not None
        return owner

    def setup(self) -> None:
        super().setup()
        if self.server.address_family != socket.AF_UNIX:  # which refuses TCP's options
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        self.connection.settimeout(self.owner.idle_seconds)  # an idle connection ends then
        handshake(self.connection)  # TLS: a failed one ends this connection only

    def address_string(self) -> str:
        # A UNIX socket's caller has no address (an empty string, not a tuple).
        return str(self.client_address[0]) if self.client_address else "local"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s: " + format, self.address_string(), *args)
