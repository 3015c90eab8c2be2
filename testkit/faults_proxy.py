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

Per-request faults and latency (``"forward"`` mode only; every knob can be set
at any time, from any thread):

* ``proxy.fail_ratio``: the fraction (0..1) of requests to fail, drawn from a
  private ``random.Random(seed)`` (``FaultsProxy(..., seed=7)`` or
  ``running_proxy(endpoint, seed=7)``), so a run whose requests come in the
  same order fails the same ones; one draw is made per eligible request, and
  none while ``fail_ratio`` is 0;
* ``proxy.fault``: how a failed request fails: ``"error"`` answers it with
  ``HTTP/1.1 503 Slow Down`` and an S3 ``SlowDown`` error body, then closes the
  connection; ``"cut"`` closes the connection without an answer (the client
  sees EOF or a reset). Nothing of a failed request reaches the server;
* ``proxy.fault_methods``: the methods that can fail (``frozenset({"PUT",
  "POST"})`` fails uploads only); ``None``, the default, means all of them;
* ``proxy.delay``: seconds to wait before passing on (or failing) each
  request, whatever its method: a high-latency endpoint (e.g. ``0.05``);
* ``proxy.injected``: how many faults have been injected so far
  (``reset_counts()`` zeroes it along with ``requests``).

Bytes the server sends back are counted too, by the method of the request they
answer (``proxy.response_bytes("GET")``: status lines, headers and bodies of
every GET, i.e. what the object store sent for reads; ``None``: everything).
A response is the answer to the latest request seen on its connection (HTTP/1.1
without pipelining; moto even closes each connection after one request).

Failed requests are still counted and kept in ``requests``. A request is
recognised when a read from the client begins with its request line: HTTP/1.1
clients send the next request on a connection only after the previous
response, and write a request's line and headers at once, so each request
starts a new read. (Pipelined requests in one read are all counted, but only
the first is subject to faults and delay.)
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

_REQUEST_LINE = re.compile(rb"(GET|HEAD|PUT|POST|DELETE|PATCH|OPTIONS) (\S+) HTTP/1\.[01]\r\n")

FAULTS = frozenset({"error", "cut"})

_ERROR_BODY = b"<Error><Code>SlowDown</Code><Message>injected</Message></Error>"
_LINGER_S = 2.0  # how long an "error" answer waits for the client to hang up


def _error_response(method: str) -> bytes:
    body = b"" if method == "HEAD" else _ERROR_BODY  # a HEAD answer carries no body
    head = (
        "HTTP/1.1 503 Slow Down\r\n"
        "Content-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


class FaultsProxy:
    def __init__(self, upstream_host: str, upstream_port: int, *, seed: int | None = None) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self.mode = "forward"
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self._fail_ratio = 0.0
        self._fault = "error"
        self._fault_methods: frozenset[str] | None = None
        self._delay = 0.0
        self._injected = 0
        self._response_bytes: Counter[str] = Counter()
        self._stopping = False
        self._sockets: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- fault knobs -------------------------------------------------------

    @property
    def fail_ratio(self) -> float:
        with self._lock:
            return self._fail_ratio

    @fail_ratio.setter
    def fail_ratio(self, value: float) -> None:
        value = float(value)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"fail_ratio must be within 0..1, not {value!r}")
        with self._lock:
            self._fail_ratio = value

    @property
    def fault(self) -> str:
        with self._lock:
            return self._fault

    @fault.setter
    def fault(self, value: str) -> None:
        if value not in FAULTS:
            raise ValueError(f"fault must be one of {sorted(FAULTS)}, not {value!r}")
        with self._lock:
            self._fault = value

    @property
    def fault_methods(self) -> frozenset[str] | None:
        with self._lock:
            return self._fault_methods

    @fault_methods.setter
    def fault_methods(self, value: frozenset[str] | None) -> None:
        methods = None if value is None else frozenset(m.upper() for m in value)
        with self._lock:
            self._fault_methods = methods

    @property
    def delay(self) -> float:
        with self._lock:
            return self._delay

    @delay.setter
    def delay(self, value: float) -> None:
        value = float(value)
        if value < 0:
            raise ValueError(f"delay must not be negative, not {value!r}")
        with self._lock:
            self._delay = value

    @property
    def injected(self) -> int:
        """How many faults have been injected (since the last ``reset_counts``)."""
        with self._lock:
            return self._injected

    # -- counts ------------------------------------------------------------

    def count(self, method: str | None = None) -> int:
        with self._lock:
            if method is None:
                return len(self.requests)
            return sum(1 for m, _ in self.requests if m == method)

    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(m for m, _ in self.requests)

    def response_bytes(self, method: str | None = None) -> int:
        """Bytes the server sent in answer to requests of ``method`` (all with None)."""
        with self._lock:
            if method is None:
                return sum(self._response_bytes.values())
            return self._response_bytes[method]

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self._injected = 0
            self._response_bytes.clear()

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
        latest: list[str] = []  # the method of the connection's latest request
        threading.Thread(
            target=self._pump, args=(upstream, client, False, latest), daemon=True
        ).start()
        self._pump(client, upstream, True, latest)

    def _drain(self, client: socket.socket) -> None:
        try:
            while client.recv(65536):
                pass
        except OSError:
            pass
        finally:
            self._untrack(client)

    def _pump(
        self, src: socket.socket, dst: socket.socket, requests: bool, latest: list[str]
    ) -> None:
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
                    line = _REQUEST_LINE.match(data)
                    if line is not None:
                        method = line.group(1).decode()
                        latest[:] = [method]
                        fault = self._before_request(method)
                        if fault is not None:
                            self._inject(fault, method, src, dst)
                            break
                elif latest:
                    with self._lock:
                        self._response_bytes[latest[0]] += len(data)
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

    def _before_request(self, method: str) -> str | None:
        """Wait out ``delay``, then draw whether this request fails: its fault, or None."""
        delay = self.delay
        if delay > 0:
            time.sleep(delay)
        with self._lock:
            if self._fail_ratio <= 0.0:
                return None
            if self._fault_methods is not None and method not in self._fault_methods:
                return None
            if self._random.random() >= self._fail_ratio:
                return None
            self._injected += 1
            return self._fault

    def _inject(
        self, fault: str, method: str, client: socket.socket, upstream: socket.socket
    ) -> None:
        """Fail the request just read from ``client``; close both sockets of the connection."""
        try:
            if fault == "error":
                with contextlib.suppress(OSError):
                    client.sendall(_error_response(method))
                    client.shutdown(socket.SHUT_WR)
                    self._linger(client)
        finally:
            # Upstream has seen nothing of this request, so it has nothing to answer.
            for s in (client, upstream):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                self._untrack(s)

    @staticmethod
    def _linger(client: socket.socket) -> None:
        """Read and drop what the client still sends until it hangs up (bounded).

        Closing a socket with unread input makes the kernel send a reset, which
        can destroy the answer before the client has read it.
        """
        deadline = time.monotonic() + _LINGER_S
        while (left := deadline - time.monotonic()) > 0:
            client.settimeout(left)
            if not client.recv(65536):
                return


@contextmanager
def running_proxy(upstream_endpoint: str, *, seed: int | None = None) -> Iterator[FaultsProxy]:
    """A started proxy in front of ``http://127.0.0.1:PORT``; stopped on exit."""
    hostport = upstream_endpoint.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    proxy = FaultsProxy(host, int(port), seed=seed)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
