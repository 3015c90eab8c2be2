"""What one client may ask of the tree service: message sizes and calls in flight.

Message sizes: a request is at most ``MAX_REQUEST_BYTES`` (the largest real
one, a SetXattr value or a 4 KiB symlink target, is far smaller) and a reply
at most ``MAX_REPLY_BYTES`` (a ReadDir page); clients use the same two values
the other way round (both from ``meta/wire/constants.py``). A larger message is refused by
gRPC itself with RESOURCE_EXHAUSTED before any handler runs.

Calls in flight: ``ClientLimiter``, a server interceptor, lets each client
(the peer's address without its port, so every mount of one node is one
client; one UNIX-socket peer is one client) run at most
``max_calls_per_client`` unary calls at once. A call past that waits up to
``queue_seconds`` for one of them to end -- at most
``max_calls_per_client // 4 + 1`` calls wait, each holding a server thread --
and is then refused with RESOURCE_EXHAUSTED and errno EAGAIN in the trailing
metadata: the call never ran, so sending it again later is safe. Watch
streams (one per mount, for as long as it is mounted) are counted apart, up
to ``max_streams_per_client``, and refused at once past it, so a node's
mounts keep their streams however busy their calls are. One client can hold
at most ``max_calls_per_client * 5 / 4 + max_streams_per_client`` of the
server's threads; ``--threads`` larger than that leaves the rest to others.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from cloudfs.meta.wire.constants import ERRNO_KEY, MAX_REPLY_BYTES, MAX_REQUEST_BYTES


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """``max_calls_per_client``/``max_streams_per_client``: 0 for no limit."""

    max_request_bytes: int = MAX_REQUEST_BYTES
    max_reply_bytes: int = MAX_REPLY_BYTES
    max_calls_per_client: int = 128
    max_streams_per_client: int = 128
    queue_seconds: float = 0.5

    def grpc_options(self) -> list[tuple[str, int]]:
        return [
            ("grpc.max_receive_message_length", self.max_request_bytes),
            ("grpc.max_send_message_length", self.max_reply_bytes),
        ]


def client_of(peer: str) -> str:
    """The client a peer (``context.peer()``: ``ipv4:10.0.0.7:51234``, ``ipv6:[::1]:5``,
    ``unix:/path``) stands for: its address without the port, or its transport."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return f"{kind}:{rest.rpartition(':')[0]}"
    return kind


class ClientSlots:
    """At most ``limit`` holders per client; ``acquire`` waits up to ``wait`` seconds
    (at most ``limit // 4 + 1`` waiters per client; no waiting with ``wait`` 0)."""

    def __init__(self, limit: int, wait: float) -> None:
        self._limit = limit
        self._wait = wait
        self._max_waiting = limit // 4 + 1 if wait > 0 else 0
        self._cond = threading.Condition()
        self._held: dict[str, int] = {}
        self._waiting: dict[str, int] = {}

    def acquire(self, client: str) -> bool:
        with self._cond:
            if self._held.get(client, 0) >= self._limit:
                if self._waiting.get(client, 0) >= self._max_waiting:
                    return False
                self._waiting[client] = self._waiting.get(client, 0) + 1
                until = time.monotonic() + self._wait
                try:
                    while self._held.get(client, 0) >= self._limit:
                        left = until - time.monotonic()
                        if left <= 0:
                            return False
                        self._cond.wait(left)
                finally:
                    self._waiting[client] -= 1
                    if not self._waiting[client]:
                        del self._waiting[client]
            self._held[client] = self._held.get(client, 0) + 1
            return True

    def release(self, client: str) -> None:
        with self._cond:
            self._held[client] -= 1
            if not self._held[client]:
                del self._held[client]
            self._cond.notify_all()

    def held(self, client: str) -> int:
        with self._cond:
            return self._held.get(client, 0)


class ClientLimiter(grpc.ServerInterceptor):  # type: ignore[misc]  # grpc is untyped here
    """Bounds each client's unary calls and streams in flight (see the module doc)."""

    def __init__(self, limits: ServerLimits) -> None:
        self._limits = limits
        self._calls = ClientSlots(limits.max_calls_per_client, limits.queue_seconds)
        self._streams = ClientSlots(limits.max_streams_per_client, 0.0)

    def intercept_service(
        self, continuation: Callable[[Any], Any], handler_call_details: Any
    ) -> Any:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        if handler.unary_unary is not None and self._limits.max_calls_per_client:
            return handler._replace(unary_unary=self._unary(handler.unary_unary))
        if handler.unary_stream is not None and self._limits.max_streams_per_client:
            return handler._replace(unary_stream=self._stream(handler.unary_stream))
        return handler

    def _unary(self, behavior: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def limited(request: Any, context: grpc.ServicerContext) -> Any:
            client = client_of(context.peer())
            if not self._calls.acquire(client):
                _refuse(context, client, "calls", self._limits.max_calls_per_client)
            try:
                return behavior(request, context)
            finally:
                self._calls.release(client)

        return limited

    def _stream(
        self, behavior: Callable[[Any, Any], Iterator[Any]]
    ) -> Callable[[Any, Any], Iterator[Any]]:
        def limited(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            client = client_of(context.peer())
            if not self._streams.acquire(client):
                _refuse(context, client, "streams", self._limits.max_streams_per_client)
            try:
                yield from behavior(request, context)
            finally:
                self._streams.release(client)

        return limited


def _refuse(context: grpc.ServicerContext, client: str, what: str, limit: int) -> None:
    context.set_trailing_metadata(((ERRNO_KEY, str(errno.EAGAIN)),))
    context.abort(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        f"{client} has {limit} {what} in flight already (the most per client); try again later",
    )
