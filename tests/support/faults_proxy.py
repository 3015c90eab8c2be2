"""A small TCP proxy on 127.0.0.1 for tests: counts HTTP requests, can cut the line.

Point a mount's ``--s3-endpoint`` at ``proxy.endpoint`` instead of the S3
server's. The proxy forwards bytes unchanged in both directions and, on the
client-to-server side, recognises HTTP/1.x request lines (``HEAD /b/k HTTP/1.1``)
to count requests by method (``proxy.count("HEAD")``) and keep their targets
(``proxy.requests``).

Modes (``proxy.mode = ...``):

* ``"forward"``: normal operation;
* ``"refuse"``: new connections are closed at once, open ones are cut;
* ``"blackhole"``: connections are accepted and read, but nothing is ever
  answered (a hung server); open ones stop forwarding too.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

_REQUEST_LINE = re.compile(rb"(GET|HEAD|PUT|POST|DELETE|PATCH|OPTIONS) (\S+) HTTP/1\.[01]\r\n")


class FaultsProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self.mode = "forward"
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._stopping = False
        self._sockets: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def count(self, method: str | None = None) -> int:
        with self._lock:
            if method is None:
                return len(self.requests)
            return sum(1 for m, _ in self.requests if m == method)

    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(m for m, _ in self.requests)

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()

    def cut(self) -> None:
        """Close every open connection (clients see a reset or EOF)."""
        with self._lock:
            sockets = list(self._sockets)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()
        self._thread.join(timeout=5)

    # -- internals ---------------------------------------------------------

    def _track(self, s: socket.socket) -> None:
        with self._lock:
            self._sockets.add(s)

    def _untrack(self, s: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(s)
        with contextlib.suppress(OSError):
            s.close()

    def _accept_loop(self) -> None:
        while not self._stopping:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.mode == "refuse":
                with contextlib.suppress(OSError):
                    client.close()
                continue
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        if self.mode == "blackhole":
            self._drain(client)
            return
        try:
            upstream = socket.create_connection(self._upstream, timeout=10)
            upstream.settimeout(None)
        except OSError:
            self._untrack(client)
            return
        self._track(upstream)
        threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()
        self._pump(client, upstream, True)

    def _drain(self, client: socket.socket) -> None:
        try:
            while client.recv(65536):
                pass
        except OSError:
            pass
        finally:
            self._untrack(client)

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        tail = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.mode == "refuse":
                    break
                if self.mode == "blackhole":
                    continue  # swallow: the other side never hears back
                if requests:
                    tail = self._scan(tail + data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._untrack(src)
            self._untrack(dst)

    def _scan(self, buf: bytes) -> bytes:
        last = 0
        found = []
        for m in _REQUEST_LINE.finditer(buf):
            found.append((m.group(1).decode(), m.group(2).decode(errors="replace")))
            last = m.end()
        if found:
            with self._lock:
                self.requests.extend(found)
        rest = buf[last:]
        return rest[-512:]  # enough to hold a request line split across reads


@contextmanager
def running_proxy(upstream_endpoint: str) -> Iterator[FaultsProxy]:
    """A started proxy in front of ``http://127.0.0.1:PORT``; stopped on exit."""
    hostport = upstream_endpoint.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    proxy = FaultsProxy(host, int(port))
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
