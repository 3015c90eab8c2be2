"""The tree service: Meta-, Volume-, CacheGroup-, CacheReportService (proto/cloudfs/v1/meta.proto).

Every MetaService call names its volume; the call runs the volume's tree
operations (``Volumes.tree``) in the server's thread pool. The handlers are
built from one table (RPC -> request type, how to call the Meta protocol, how
to wrap the result) rather than written out one by one: each RPC is exactly
one Meta call. An ``FsError`` becomes the matching gRPC status with the errno
in the trailing metadata (``convert.py``); anything else is logged with its
traceback and answered INTERNAL/EIO. CacheGroupService keeps the members of
cache groups (``groups.py``) in the same engine; the janitor that ends
expired sessions also removes expired members. CacheReportService keeps, in
memory, how many bytes of each volume each node caches (``cache_reports.py``),
for the Kubernetes scheduler extender.

With a token, every call must carry ``authorization: Bearer <token>``
(UNAUTHENTICATED otherwise); a token kept in a file is re-read when the file
changes (``cloudfs/tokens.py``). With ``tls`` the port serves TLS only (and
with its client CA, mTLS); without, the server listens as given, so bind it
to loopback or a private network (``cloudfs/tls.py``).
"""

from __future__ import annotations

import errno
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc

from cloudfs.errors import FsError
from cloudfs.meta.service import changes
from cloudfs.meta.service.cache_reports import CacheReports
from cloudfs.meta.service.calls import META_CALLS, SESSION_CALLS, Call, SessionCall
from cloudfs.meta.service.decoding import decoder, refuse_undecodable
from cloudfs.meta.service.groups import CacheGroups
from cloudfs.meta.service.limits import ClientLimiter, ServerLimits
from cloudfs.meta.service.volumes import VolumeSet
from cloudfs.meta.wire import convert as cv
from cloudfs.meta.wire.constants import (
    ERRNO_KEY,
    GROUP_SERVICE,
    META_SERVICE,
    REPORT_SERVICE,
    SESSION_KEY,
    VOLUME_SERVICE,
)
from cloudfs.meta.wire.volumes import volume_from_pb, volume_to_pb
from cloudfs.tls import ServerTLS
from cloudfs.tokens import Token, accepts, token_source
from cloudfs.v1 import meta_pb2 as pb

log = logging.getLogger(__name__)


WATCH_POLL_SECONDS = 0.25
HEARTBEAT_SECONDS = 10.0  # Watch streams send one at least this often
JANITOR_SECONDS = 10.0  # how often expired sessions are ended


def _deleted(volumes: VolumeSet, name: str) -> pb.Empty:
    volumes.delete(name)
    return pb.Empty()


def _left(groups: CacheGroups, request: pb.GroupMemberRequest) -> pb.Empty:
    groups.leave(request.group, request.address)
    return pb.Empty()


def _reported(reports: CacheReports, r: pb.CacheReport) -> int:
    return reports.report(r.volume, r.node, r.reporter, r.cached_bytes, r.ttl_ms)


def _node_caches(reports: CacheReports, volume: str) -> pb.NodeCaches:
    held = reports.cached_bytes(volume)
    return pb.NodeCaches(nodes=[pb.NodeCache(node=n, cached_bytes=b) for n, b in held.items()])


def _sessionless(call: Call) -> SessionCall:
    return lambda meta, request, session: call(meta, request)


def _ignoring_context(fn: Callable[[Any], Any]) -> Callable[[Any, grpc.ServicerContext], Any]:
    return lambda request, context: fn(request)


class TreeServer:
    """A gRPC server for ``volumes``; the constructor binds ``address`` (``HOST:PORT``, or
    ``unix:PATH`` for a mount's own tree: ``single.py``), ``start()`` serves, ``stop()`` ends it."""

    def __init__(
        self,
        volumes: VolumeSet,
        address: str,
        *,
        token: Token | None = None,
        threads: int = 256,
        groups: CacheGroups | None = None,
        interceptors: tuple[grpc.ServerInterceptor, ...] = (),
        tls: ServerTLS | None = None,
        limits: ServerLimits | None = None,
    ) -> None:
        """``threads``: calls at once, including one long-lived Watch per mount;
        ``groups``: the cache groups (default: in the volumes' engine);
        ``interceptors``: see every call first (a read-only mount refuses changes);
        ``tls``: serve TLS (mTLS with its client CA) rather than plaintext;
        ``limits``: message sizes and calls in flight per client (``limits.py``;
        default ``ServerLimits()``)."""
        self._volumes = volumes
        self._groups = groups or CacheGroups(volumes.engine)
        self.cache_reports = CacheReports()
        self._token = token_source(token)
        limits = limits or ServerLimits()
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=threads),
            interceptors=(ClientLimiter(limits), *interceptors),
            options=limits.grpc_options(),
        )
        self._server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(META_SERVICE, self._meta_handlers()),
                grpc.method_handlers_generic_handler(VOLUME_SERVICE, self._volume_handlers()),
                grpc.method_handlers_generic_handler(GROUP_SERVICE, self._group_handlers()),
                grpc.method_handlers_generic_handler(REPORT_SERVICE, self._report_handlers()),
            )
        )
        self._stopping = threading.Event()
        self._janitor = threading.Thread(
            target=self._expire_forever, name="session-janitor", daemon=True
        )
        if tls is None:
            self.port = self._server.add_insecure_port(address)
        else:
            self.port = self._server.add_secure_port(address, tls.grpc_credentials())
        if self.port == 0:
            raise OSError(errno.EADDRINUSE, f"cannot listen on {address}")

    def start(self) -> None:
        self._server.start()
        self._janitor.start()

    def stop(self, grace: float = 2.0) -> None:
        self._stopping.set()
        self._server.stop(grace).wait()

    def expire_sessions(self) -> int:
        """End the sessions of every volume that stopped renewing; returns how many."""
        ended = 0
        for spec in self._volumes.list():
            try:
                ended += self._volumes.tree(spec.name).expire_sessions()
            except FsError as exc:  # one volume's trouble must not stop the others'
                log.warning("expiring sessions of volume %s: %s", spec.name, exc)
        return ended

    def _expire_forever(self) -> None:
        while not self._stopping.wait(JANITOR_SECONDS):
            try:
                if ended := self.expire_sessions():
                    log.info("ended %d expired sessions", ended)
                if gone := self._groups.expire():
                    log.info("removed %d expired cache group members", gone)
                self.cache_reports.expire()
            except Exception:
                log.exception("session janitor failed; trying again later")

    def wait(self) -> None:
        self._server.wait_for_termination()

    # -- handlers ------------------------------------------------------------

    def _meta_handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        handlers = {}
        for name, (request_type, call, reply) in META_CALLS.items():
            handlers[name] = self._unary(
                name, self._meta_call(_sessionless(call), reply), request_type
            )
        for name, (request_type, session_call, reply) in SESSION_CALLS.items():
            handlers[name] = self._unary(name, self._meta_call(session_call, reply), request_type)
        handlers["Watch"] = grpc.unary_stream_rpc_method_handler(
            self._watch,
            request_deserializer=decoder(pb.WatchRequest),
            response_serializer=lambda m: m.SerializeToString(),
        )
        return handlers

    def _meta_call(
        self, call: SessionCall, reply: Callable[[Any], Any]
    ) -> Callable[[Any, grpc.ServicerContext], Any]:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            session = dict(context.invocation_metadata()).get(SESSION_KEY, "")
            with changes.origin(session):  # the origin of the tree writes it makes (WatchedKV)
                return reply(call(self._volumes.tree(request.volume), request, session))

        return handle

    def _watch(self, request: pb.WatchRequest, context: grpc.ServicerContext) -> Iterator[Any]:
        """Stream the volume's changes by other sessions until the client goes away."""
        self._authenticate(context)
        refuse_undecodable(request, context)
        try:
            feed = self._volumes.feed(request.volume)
        except FsError as exc:
            context.set_trailing_metadata(((ERRNO_KEY, str(exc.errno)),))
            context.abort(cv.status_of(exc.errno), str(exc))
        sub = feed.subscribe(request.session)
        quiet_since = time.monotonic()
        try:
            while context.is_active() and not self._stopping.is_set():
                try:  # short waits: a stopping server ends its streams at once
                    change = sub.changes.get(timeout=WATCH_POLL_SECONDS)
                except queue.Empty:
                    if time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                        quiet_since = time.monotonic()
                        yield pb.Invalidation()  # a heartbeat: a dead client shows up here
                    continue
                quiet_since = time.monotonic()
                lost, sub.lost = sub.lost, False
                yield pb.Invalidation(
                    inodes=sorted(change.inodes),
                    entries=[pb.EntryRef(parent=p, name=n) for p, n in sorted(change.entries)],
                    lost=lost,
                )
        finally:
            feed.unsubscribe(sub)

    def _volume_handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        v = self._volumes
        table: dict[str, tuple[Any, Callable[[Any], Any]]] = {
            "CreateVolume": (pb.Volume, lambda r: volume_to_pb(v.create(volume_from_pb(r)))),
            "GetVolume": (pb.VolumeRef, lambda r: volume_to_pb(v.get(r.volume))),
            "ListVolumes": (
                pb.Empty, lambda r: pb.VolumeList(volumes=[volume_to_pb(x) for x in v.list()]),
            ),
            "DeleteVolume": (pb.VolumeRef, lambda r: _deleted(v, r.volume)),
        }  # fmt: skip
        return {
            name: self._unary(name, _ignoring_context(fn), request_type)
            for name, (request_type, fn) in table.items()
        }

    def _group_handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        g = self._groups
        table: dict[str, tuple[Any, Callable[[Any], Any]]] = {
            "JoinGroup": (
                pb.GroupMemberRequest,
                lambda r: pb.JoinGroupReply(expires_ns=g.join(r.group, r.address, r.ttl_ms)),
            ),
            "LeaveGroup": (pb.GroupMemberRequest, lambda r: _left(g, r)),
            "ListGroup": (pb.GroupRef, lambda r: pb.GroupMembers(members=g.members(r.group))),
        }
        return {
            name: self._unary(name, _ignoring_context(fn), request_type)
            for name, (request_type, fn) in table.items()
        }

    def _report_handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        reports = self.cache_reports
        table: dict[str, tuple[Any, Callable[[Any], Any]]] = {
            "ReportCache": (
                pb.CacheReport,
                lambda r: pb.CacheReportReply(expires_ns=_reported(reports, r)),
            ),
            "CachedBytes": (pb.VolumeRef, lambda r: _node_caches(reports, r.volume)),
        }
        return {
            name: self._unary(name, _ignoring_context(fn), request_type)
            for name, (request_type, fn) in table.items()
        }

    def _unary(
        self, name: str, handle: Callable[[Any, grpc.ServicerContext], Any], request_type: Any
    ) -> grpc.RpcMethodHandler:
        def guarded(request: Any, context: grpc.ServicerContext) -> Any:
            self._authenticate(context)
            refuse_undecodable(request, context)
            try:
                return handle(request, context)
            except FsError as exc:
                context.set_trailing_metadata(((ERRNO_KEY, str(exc.errno)),))
                context.abort(cv.status_of(exc.errno), cv.printable(str(exc) or type(exc).__name__))
            except Exception:
                log.exception("%s failed", name)
                context.set_trailing_metadata(((ERRNO_KEY, str(errno.EIO)),))
                context.abort(grpc.StatusCode.INTERNAL, f"{name}: internal error")

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=decoder(request_type),
            response_serializer=lambda m: m.SerializeToString(),
        )

    def _authenticate(self, context: grpc.ServicerContext) -> None:
        if self._token is None:
            return
        if not accepts(self._token, dict(context.invocation_metadata()).get("authorization")):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token")
