"""A small client of etcd's v3 gRPC API (the KV and Watch services) for the etcd engine.

Messages are etcd's own (``cloudfs.etcdpb``, from etcd's ``rpc.proto``); an
error is a gRPC status whose code and details are etcd's (``OUT_OF_RANGE``
"etcdserver: mvcc: required revision has been compacted", ...).

One ``grpc.Channel`` per endpoint, shared by every thread (gRPC multiplexes
calls on its HTTP/2 connection and reconnects by itself, after at most
``RECONNECT_MAX_MS`` once a member is back). Every call has ``timeout`` as its
deadline. ``https://`` endpoints are reached over TLS: checked against the CA of
a ``ClientTLS`` when one is given (a private CA, with this client's certificate for
etcd's ``--client-cert-auth``), else against the system's roots; ``server_name``
is the name the members' certificates must carry when it is not the endpoint's
host. ``http://`` and bare ``host:port`` are plaintext.

Failover: a call that cannot reach an endpoint, that runs past its deadline or
that etcd answers with Unavailable (no leader, leader changed, request timed
out) goes to the next endpoint, with a growing jittered pause after each round
over the endpoints, for at most ``retry_for`` seconds (enough to ride out an
election); then ``RemoteIOError``. The endpoint that answered is tried first
next time. A call that is not idempotent (a Txn) is never sent twice here:
unless gRPC says it could not connect (the request never left this process),
a failure raises ``OutcomeUnknown`` and the caller decides (``kv_etcd`` sends
it again with a check of whether the first one was applied).
"""

from __future__ import annotations

import random
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import grpc

from cloudfs.errors import RemoteIOError
from cloudfs.etcdpb import rpc_pb2_grpc as rpc
from cloudfs.tls import ClientTLS

UNAVAILABLE = grpc.StatusCode.UNAVAILABLE  # a member cannot serve right now
DEADLINE_EXCEEDED = grpc.StatusCode.DEADLINE_EXCEEDED
OUT_OF_RANGE = grpc.StatusCode.OUT_OF_RANGE  # "required revision has been compacted", "future"
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT  # "too many operations in txn request"
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED  # over --max-request-bytes
ROUND_PAUSE_MAX = 1.0  # seconds, after a full round of failed endpoints
RECONNECT_MAX_MS = 1000  # gRPC's pause between attempts to reach a member that is down
# gRPC's words for a call that failed before any byte of it was sent
NOT_SENT = ("failed to connect to all addresses", "DNS resolution failed")


class EtcdError(RemoteIOError):
    """etcd refused a request (``code``: its gRPC status code)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"etcd: {message} ({code.name})")
        self.code = code
        self.detail = message


class OutcomeUnknown(RemoteIOError):
    """A non-idempotent request failed after it may have reached etcd."""


def parse_endpoint(endpoint: str) -> tuple[str, str, int]:
    """``http://host:port``, ``https://host:port`` or ``host:port`` -> (scheme, host, port)."""
    url = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"bad etcd endpoint {endpoint!r} (expected http://host:port)")
    return url.scheme, url.hostname, url.port or 2379


def open_channel(
    endpoint: str, tls: ClientTLS | None = None, server_name: str | None = None
) -> grpc.Channel:
    """A channel to one member (``http(s)://host:port``): TLS for https."""
    scheme, host, port = parse_endpoint(endpoint)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", -1),  # etcd bounds its answers itself
        ("grpc.max_send_message_length", -1),  # and refuses what is over --max-request-bytes
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", RECONNECT_MAX_MS),
    ]
    if scheme == "https":
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        credentials = tls.grpc_credentials() if tls else grpc.ssl_channel_credentials()
        return grpc.secure_channel(target, credentials, options=options)
    return grpc.insecure_channel(target, options=options)


@dataclass(frozen=True)
class _Member:
    url: str
    channel: grpc.Channel
    kv: Any  # rpc.KVStub
    watch: Any  # rpc.WatchStub


class EtcdClient:
    """Calls to one of ``endpoints`` (client URLs of one etcd cluster).

    Args:
        endpoints: client URLs (``http://host:2379``) of the cluster's members.
        timeout: seconds: the deadline of each call.
        retry_for: seconds during which failed calls go round the endpoints
            again (every endpoint is tried at least once); longer than an
            election (etcd's ``--election-timeout``, 1 s by default).
        tls, server_name: how ``https://`` endpoints are checked (``open_channel``).
    """

    def __init__(
        self,
        endpoints: list[str],
        timeout: float,
        retry_for: float,
        *,
        tls: ClientTLS | None = None,
        server_name: str | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoint")
        urls = []
        for endpoint in endpoints:
            scheme, host, port = parse_endpoint(endpoint)
            urls.append(f"{scheme}://{host}:{port}")
        self._members: list[_Member] = []
        for url in urls:
            channel = open_channel(url, tls, server_name)
            kv = rpc.KVStub(channel)  # type: ignore[no-untyped-call]
            watch = rpc.WatchStub(channel)  # type: ignore[no-untyped-call]
            self._members.append(_Member(url, channel, kv, watch))
        self.timeout = timeout
        self._retry_for = retry_for
        self._preferred = 0

    @property
    def endpoints(self) -> list[str]:
        return [m.url for m in self._members]

    def watch_stub(self, index: int) -> Any:
        """The Watch service of endpoint ``index`` (modulo their number)."""
        return self._members[index % len(self._members)].watch

    def call(self, method: str, request: Any, *, idempotent: bool = True) -> Any:
        """The answer of KV ``method`` (``"Range"``, ``"Txn"``, ``"Compact"``) to ``request``.

        Raises:
            EtcdError: etcd refused the request (not retried, except Unavailable).
            OutcomeUnknown: ``idempotent`` is false and the request may have been applied.
            RemoteIOError: no endpoint answered for ``retry_for`` seconds.
        """
        count = len(self._members)
        first = self._preferred
        deadline = time.monotonic() + self._retry_for
        last: grpc.RpcError | None = None
        tries = 0
        while tries < count or time.monotonic() < deadline:
            if tries and tries % count == 0:  # a full round failed: an election, a restart
                pause = min(ROUND_PAUSE_MAX, 0.05 * 2 ** (tries // count - 1))
                time.sleep(pause * random.uniform(0.5, 1.0))
            index = (first + tries) % count
            tries += 1
            try:
                answer = self._send(index, method, request)
            except grpc.RpcError as exc:
                code, detail = exc.code(), exc.details() or ""
                if code not in (UNAVAILABLE, DEADLINE_EXCEEDED):
                    raise EtcdError(code, detail) from None
                self._skip(index)
                if not idempotent and not any(words in detail for words in NOT_SENT):
                    raise OutcomeUnknown(f"etcd {method}: {detail} ({code.name})") from None
                last = exc
                continue
            self._preferred = index
            return answer
        text = f"{last.details()} ({last.code().name})" if last is not None else "?"
        raise RemoteIOError(
            f"etcd unreachable at {', '.join(self.endpoints)} ({tries} tries): {text}"
        )

    def call_once(self, method: str, request: Any, timeout: float) -> Any:
        """One try of ``call`` at the preferred endpoint, within ``timeout`` seconds: for
        what may be skipped when etcd is away (``RemoteIOError``), such as a clean-up."""
        member = self._members[self._preferred]
        try:
            return getattr(member.kv, method)(request, timeout=timeout)
        except grpc.RpcError as exc:
            raise RemoteIOError(f"etcd {method} at {member.url}: {exc.details()}") from None

    def _send(self, index: int, method: str, request: Any) -> Any:
        """One call to endpoint ``index``; raises ``grpc.RpcError``."""
        return getattr(self._members[index].kv, method)(request, timeout=self.timeout)

    def _skip(self, index: int) -> None:
        """Prefer the next endpoint from now on (the failed one answers last)."""
        if self._preferred == index:
            self._preferred = (index + 1) % len(self._members)

    def close(self) -> None:
        """Close every channel; calls after this fail."""
        for member in self._members:
            member.channel.close()
