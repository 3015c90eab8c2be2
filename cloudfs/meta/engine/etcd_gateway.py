"""A small client for etcd's v3 JSON gateway (``POST /v3/kv/range``, ``/v3/kv/txn``).

etcd serves the gateway on its client URL: ``/v3/`` since 3.4 (``/v3beta/`` is
3.3's path, kept by 3.4 and gone in 3.5). Bodies are the protobuf messages of
``rpc.proto`` in JSON: bytes in base64, int64 as decimal strings, snake_case
names (``range_end``, ``mod_revision``), and fields equal to their default
(``false``, ``0``, empty) left out of answers. An error comes as a non-200
status with ``{"code": <gRPC code>, "message": "etcdserver: ..."}``.

Connections are kept alive, one per thread and endpoint (``http.client``, the
standard library under ``urllib``: a fresh connection per call would leave a
TIME_WAIT socket behind every round trip and run out of ephemeral ports at a
few hundred calls a second). Every socket operation has ``timeout``.

Failover: a call that cannot reach an endpoint (refused, reset, timed out) or
that etcd answers with Unavailable (no leader, leader changed, request timed
out) goes to the next endpoint, with a growing jittered pause after each
round over the endpoints, for at most ``retry_for`` seconds (enough to ride
out an election); then ``RemoteIOError``.
The endpoint that answered is tried first next time. A call that is not
idempotent (a Txn) is never sent twice here: once it may have reached etcd, a
failure raises ``OutcomeUnknown`` and the caller decides (``kv_etcd`` sends it
again with a check of whether the first one was applied).
"""

from __future__ import annotations

import base64
import http.client
import json
import random
import threading
import time
import urllib.parse
from typing import Any

from cloudfs.errors import RemoteIOError

UNAVAILABLE = 14  # gRPC codes etcd answers when a member cannot serve right now
DEADLINE_EXCEEDED = 4
OUT_OF_RANGE = 11  # "required revision has been compacted", "... is a future revision"
INVALID_ARGUMENT = 3  # "too many operations in txn request", "request is too large"
RESOURCE_EXHAUSTED = 8  # "grpc: received message larger than max" (over --max-request-bytes)
ROUND_PAUSE_MAX = 1.0  # seconds, after a full round of failed endpoints


class EtcdError(RemoteIOError):
    """etcd refused a request (``code`` is the gRPC status code)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd: {message} (code {code})")
        self.code = code
        self.detail = message


class OutcomeUnknown(RemoteIOError):
    """A non-idempotent request failed after it may have reached etcd."""


class _NotSent(Exception):
    """Connecting failed: the request certainly did not reach etcd."""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def parse_endpoint(endpoint: str) -> tuple[str, str, int]:
    """``http://host:port``, ``https://host:port`` or ``host:port`` -> (scheme, host, port)."""
    url = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"bad etcd endpoint {endpoint!r} (expected http://host:port)")
    return url.scheme, url.hostname, url.port or 2379


class EtcdGateway:
    """POSTs JSON to one of ``endpoints`` (client URLs of one etcd cluster).

    Args:
        endpoints: client URLs (``http://host:2379``) of the cluster's members.
        timeout: seconds for each connect, send and receive.
        retry_for: seconds during which failed calls go round the endpoints
            again (every endpoint is tried at least once); longer than an
            election (etcd's ``--election-timeout``, 1 s by default).
    """

    def __init__(self, endpoints: list[str], timeout: float, retry_for: float) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoint")
        self._endpoints = [parse_endpoint(e) for e in endpoints]
        self._timeout = timeout
        self._retry_for = retry_for
        self._preferred = 0
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[http.client.HTTPConnection] = []

    @property
    def endpoints(self) -> list[str]:
        return [f"{scheme}://{host}:{port}" for scheme, host, port in self._endpoints]

    def call(self, path: str, body: dict[str, Any], *, idempotent: bool = True) -> Any:
        """The decoded JSON answer of ``POST path``.

        Raises:
            EtcdError: etcd refused the request (not retried, except Unavailable).
            OutcomeUnknown: ``idempotent`` is false and the request may have been applied.
            RemoteIOError: no endpoint answered for ``retry_for`` seconds.
        """
        data = json.dumps(body).encode()
        count = len(self._endpoints)
        first = self._preferred
        deadline = time.monotonic() + self._retry_for
        last: BaseException | None = None
        tries = 0
        while tries < count or time.monotonic() < deadline:
            if tries and tries % count == 0:  # a full round failed: an election, a restart
                pause = min(ROUND_PAUSE_MAX, 0.05 * 2 ** (tries // count - 1))
                time.sleep(pause * random.uniform(0.5, 1.0))
            index = (first + tries) % count
            tries += 1
            try:
                status, answer = self._post(index, path, data)
            except _NotSent as exc:
                last = exc.__cause__ or exc
                continue
            except (OSError, http.client.HTTPException) as exc:
                self._skip(index)
                if not idempotent:
                    raise OutcomeUnknown(f"etcd {path}: {exc!r}") from exc
                last = exc
                continue
            if status == 200:
                self._preferred = index
                return answer
            error = EtcdError(int(answer.get("code", -1)), str(answer.get("message", answer)))
            if error.code not in (UNAVAILABLE, DEADLINE_EXCEEDED):
                raise error
            self._skip(index)
            if not idempotent:
                raise OutcomeUnknown(str(error)) from error
            last = error
        raise RemoteIOError(
            f"etcd unreachable at {', '.join(self.endpoints)} ({tries} tries): {last!r}"
        ) from last

    def _skip(self, index: int) -> None:
        """Prefer the next endpoint from now on (the failed one answers last)."""
        if self._preferred == index:
            self._preferred = (index + 1) % len(self._endpoints)

    def _connection(self, index: int) -> http.client.HTTPConnection:
        conns: dict[int, http.client.HTTPConnection] | None = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        conn = conns.get(index)
        if conn is None:
            scheme, host, port = self._endpoints[index]
            kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            conn = conns[index] = kind(host, port, timeout=self._timeout)
            with self._lock:
                self._open.append(conn)
        return conn

    def _post(self, index: int, path: str, data: bytes) -> tuple[int, Any]:
        conn = self._connection(index)
        if conn.sock is None:
            try:
                conn.connect()
            except OSError as exc:
                conn.close()
                self._skip(index)
                raise _NotSent from exc
        try:
            conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            raw = response.read()
        except BaseException:
            conn.close()  # the next call on this thread reconnects
            raise
        try:
            return response.status, json.loads(raw)
        except ValueError as exc:
            text = f"etcd {path}: HTTP {response.status}, not JSON: {raw[:200]!r}"
            raise RemoteIOError(text) from exc

    def close(self) -> None:
        """Close every connection (any thread's); a later call reconnects."""
        with self._lock:
            conns, self._open = self._open, []
        for conn in conns:
            conn.close()
