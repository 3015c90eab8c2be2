"""A channel to the tree service and one call over it: deadlines, retries, tokens, errors.

Every call has a deadline and is retried by gRPC itself, with back-off, only
when the server was unreachable (UNAVAILABLE: the request never ran, so a
retry cannot apply a change twice); ``refused_busy`` and ``unreachable`` say
when a caller may send a call again itself. With ``tls`` the channel is TLS
(``cloudfs/tls.py``); a handshake that fails is UNAVAILABLE to gRPC and comes
back as EIO saying TLS (``rpc_error``). The token is read from its source on
every call; a call refused UNAUTHENTICATED is sent once more if the token
file changed since (``call_with_token``). ``ServiceClient`` is the base of the
service clients (``grpc_meta.py``, ``volumes.py``).
"""

from __future__ import annotations

import errno
import json
import logging
import socket
from collections.abc import Callable
from typing import Any

import grpc

from cloudfs.errors import AccessDenied, FsError, RemoteIOError
from cloudfs.meta.wire import convert as cv
from cloudfs.meta.wire.constants import (
    ERRNO_KEY,
    MAX_REPLY_BYTES,
    MAX_REQUEST_BYTES,
    META_SERVICE,
    VOLUME_SERVICE,
)
from cloudfs.tls import ClientTLS
from cloudfs.tokens import Token, TokenSource, token_source

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 15.0  # the server ends a session 60 s after its last heartbeat

_RETRY_POLICY = {
    "maxAttempts": 5,
    "initialBackoff": "0.2s",
    "maxBackoff": "2s",
    "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE"],
}
SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": [{"service": META_SERVICE}, {"service": VOLUME_SERVICE}],
                "retryPolicy": _RETRY_POLICY,
            }
        ]
    }
)


def open_channel(address: str, tls: ClientTLS | None = None) -> grpc.Channel:
    """A channel to a tree server: TLS with ``tls``, else plaintext.

    ``address``: HOST:PORT, or several servers of one tree, ``h1:7070,h2:7070``:
    their addresses are resolved now into one target (``failover_target``) whose
    channel uses the first that answers and moves to the next when it goes (gRPC's
    ``pick_first``); with TLS each server's certificate must name the first host."""
    target, name = (failover_target(address), address.split(",")[0]) if "," in address else (
        address, ""
    )
    options = [
        ("grpc.service_config", SERVICE_CONFIG),
        ("grpc.enable_retries", 1),
        ("grpc.max_receive_message_length", MAX_REPLY_BYTES),  # the server's limits
        ("grpc.max_send_message_length", MAX_REQUEST_BYTES),
        # a restarted server is found again within a second or two, not gRPC's
        # default back-off of up to two minutes between attempts
        ("grpc.initial_reconnect_backoff_ms", 250),
        ("grpc.min_reconnect_backoff_ms", 250),
        ("grpc.max_reconnect_backoff_ms", 2000),
    ]
    if name:
        options.append(("grpc.lb_policy_name", "pick_first"))
        host = name.rsplit(":", 1)[0].strip("[]")
        options.append(("grpc.default_authority", name))
        if tls is not None:
            options.append(("grpc.ssl_target_name_override", host))
    if tls is not None:
        return grpc.secure_channel(target, tls.grpc_credentials(), options=options)
    return grpc.insecure_channel(target, options=options)


def failover_target(address: str) -> str:
    """``h1:7070,h2:7070`` as one gRPC target of the addresses they resolve to, in their
    order: ``ipv4:10.0.0.1:7070,10.0.0.2:7070``, or ``ipv6:`` where some host has no IPv4
    address. ``RemoteIOError`` if a host does not resolve, or not to one common family."""
    per_host: list[dict[int, list[str]]] = []
    for item in address.split(","):
        host, _, port = item.rpartition(":")
        try:
            infos = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)
        except (OSError, ValueError) as exc:
            raise RemoteIOError(f"tree server {item}: cannot resolve it ({exc})") from None
        found: dict[int, list[str]] = {}
        for family, _, _, _, sockaddr in infos:
            ip = str(sockaddr[0])
            entry = f"[{ip}]:{port}" if family == socket.AF_INET6 else f"{ip}:{port}"
            if entry not in found.setdefault(family, []):
                found[family].append(entry)
        per_host.append(found)
    for family, scheme in ((socket.AF_INET, "ipv4"), (socket.AF_INET6, "ipv6")):
        if all(family in found for found in per_host):
            return f"{scheme}:" + ",".join(e for found in per_host for e in found[family])
    raise RemoteIOError(f"tree servers {address}: no address family common to all of them")


_TLS_WORDS = ("ssl", "tls", "handshake", "certificate")


def call_with_token(
    method: Callable[..., Any],
    request: Any,
    *,
    timeout: float | None,
    token: TokenSource | None,
    extra: tuple[tuple[str, str], ...] = (),
) -> Any:
    """``method(request)`` with the token of now; once more if it was refused and the
    token file changed since (a rotation the client had not seen yet)."""

    def send() -> Any:
        auth = (("authorization", f"Bearer {token.current()}"),) if token is not None else ()
        return method(request, timeout=timeout, metadata=(*auth, *extra))

    try:
        return send()
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        if code == grpc.StatusCode.UNAUTHENTICATED and token is not None and token.refresh():
            return send()
        raise


# A server at its limit for this client (meta/service/limits.py) refuses a call
# before running it: sent again after these pauses, then EAGAIN.
BUSY_PAUSES = (0.2, 0.5, 1.0)


def refused_busy(exc: grpc.RpcError) -> bool:
    """Whether the server refused the call unrun, for this client's calls in flight."""
    if not hasattr(exc, "code") or exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return False
    trailing = dict(exc.trailing_metadata() or ()) if hasattr(exc, "trailing_metadata") else {}
    return trailing.get(ERRNO_KEY) == str(errno.EAGAIN)


# A server that is down may be restarting: a call waits up to RECONNECT_SECONDS for
# the channel to connect again, then is sent again; else EIO.
RECONNECT_SECONDS = 15.0


def unreachable(exc: grpc.RpcError) -> bool:
    """Whether the call failed for want of a connection (gRPC's own retries of it spent,
    or its deadline spent on them). A connection the server closed at once (a TLS
    mismatch) is not this: it would fail the same way again."""
    code = exc.code() if hasattr(exc, "code") else None
    details = ((exc.details() if hasattr(exc, "details") else "") or "").lower()
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return True
    return code == grpc.StatusCode.UNAVAILABLE and not (
        "socket closed" in details or any(word in details for word in _TLS_WORDS)
    )


def await_connected(channel: grpc.Channel, seconds: float) -> bool:
    """Whether ``channel`` is connected, or connects within ``seconds``.

    Asked only after a failure: watching the channel all along (``subscribe``) keeps
    a gRPC thread that a forked child (a DataLoader worker) crashes on.
    """
    ready = grpc.channel_ready_future(channel)
    try:
        ready.result(timeout=max(seconds, 0.0))
    except grpc.FutureTimeoutError:
        return False
    finally:
        ready.cancel()  # no watch left behind
    return True


def rpc_error(exc: grpc.RpcError, what: str, timeout: float, *, tls: bool | None = None) -> FsError:
    """The ``FsError`` a failed call stands for; ``tls``: whether the channel is TLS (for
    the hint when the server closed the connection at once: a TLS mismatch, or mTLS
    without a client certificate), None when unknown."""
    code = exc.code() if hasattr(exc, "code") else None
    details = (exc.details() if hasattr(exc, "details") else "") or what
    trailing = dict(exc.trailing_metadata() or ()) if hasattr(exc, "trailing_metadata") else {}
    if ERRNO_KEY in trailing:
        return cv.from_errno(int(trailing[ERRNO_KEY]), details)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RemoteIOError(f"{what}: the tree service did not answer within {timeout:g} s")
    if code == grpc.StatusCode.UNIMPLEMENTED:  # a server older than this client
        return FsError(f"{what}: the tree server does not have this call", errno=errno.ENOSYS)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return AccessDenied(f"{what}: the tree service refused the token ({details})")
    if code == grpc.StatusCode.UNAVAILABLE:
        if any(word in details.lower() for word in _TLS_WORDS):
            return RemoteIOError(f"{what}: TLS with the tree service failed ({details})")
        hint = ""
        if "socket closed" in details.lower() and tls is not None:
            hint = (
                "; if it requires a client certificate, give tls_cert and tls_key"
                if tls
                else "; if it serves TLS, give its CA (tls_ca)"
            )
        return RemoteIOError(f"{what}: the tree service is unreachable ({details}){hint}")
    return FsError(f"{what}: {details}", errno=errno.EIO)


class ServiceClient:
    """One service of a tree server: a channel, a stub built by ``stub_of``, the token,
    and ``_call``, each call bounded by ``timeout`` and failing as an ``FsError``."""

    def __init__(
        self,
        address: str,
        stub_of: Any,
        *,
        token: Token | None,
        timeout: float,
        tls: ClientTLS | None = None,
    ) -> None:
        self._channel = open_channel(address, tls)
        self._tls = tls is not None
        self._stub: Any = stub_of(self._channel)
        self._token = token_source(token)
        self._timeout = timeout

    def _call(self, name: str, request: Any) -> Any:
        try:
            return call_with_token(
                getattr(self._stub, name), request, timeout=self._timeout, token=self._token
            )
        except grpc.RpcError as exc:
            raise rpc_error(exc, name, self._timeout, tls=self._tls) from None

    def close(self) -> None:
        self._channel.close()
