"""GrpcMeta: the Meta protocol of a volume served by the tree service (``cloudfs meta serve``).

Every call has a deadline (``timeout``; calls that may list the UFS first get
``listing_timeout``) and is retried by gRPC itself, with back-off, only when
the server was unreachable (UNAVAILABLE: the request never ran, so a retry
cannot apply a change twice) -- or, after a pause, when the server refused it
unrun because this host has its share of calls in flight (``BUSY_PAUSES``;
``meta/service/limits.py``) -- a restarted server is picked up again: a call
finding the server refusing connections waits up to ``reconnect`` seconds for
it (a restart is a pause, not EIO, to a training job), and a call that cannot
complete fails with EIO within a bounded time instead of hanging the mount.
Errors come back as the ``FsError`` subclass of the errno the tree produced
(``convert.from_errno``).

With ``tls`` the channel is TLS (``cloudfs/tls.py``); a handshake that fails
(a wrong CA, a plaintext server, a refused client certificate) is UNAVAILABLE
to gRPC and comes back as EIO saying TLS, within the call's deadline. The
token is read from its source on every call (``cloudfs/tokens.py``); a call
refused UNAUTHENTICATED is sent once more if the token file changed since.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import grpc

from cloudfs.errors import FsError, RemoteIOError, TreeUnreachable
from cloudfs.meta.client.channel import (
    BUSY_PAUSES,
    HEARTBEAT_SECONDS,
    RECONNECT_SECONDS,
    await_connected,
    call_with_token,
    open_channel,
    refused_busy,
    rpc_error,
    unreachable,
)
from cloudfs.meta.client.dir_attrs import KnownDirAttrs
from cloudfs.meta.client.grouped import GroupedCalls
from cloudfs.meta.interface import Invalidation
from cloudfs.meta.wire import convert as cv
from cloudfs.meta.wire.constants import MAX_RELEASES, SESSION_KEY
from cloudfs.tls import ClientTLS
from cloudfs.tokens import Token, token_source
from cloudfs.types import Attr, AttrChanges, DirEntry, FsStats, InodeId
from cloudfs.v1 import meta_pb2 as pb
from cloudfs.v1 import meta_pb2_grpc as rpc

log = logging.getLogger(__name__)

# Calls that change no directory's attributes (reads, opens, an upload's commit):
# every other call forgets what KnownDirAttrs knows before it is sent.
KEEPS_DIR_ATTRS = frozenset(
    {
        "Lookup", "LookupIfListed", "GetAttr", "ReadDir", "ReadLink", "GetXattr",
        "ListXattr", "StatFs", "ObjectKey", "Open", "Release", "ReleaseMany",
        "CommitUpload", "CommitPending", "Heartbeat", "CreateOpen",
    }
)  # fmt: skip


class GrpcMeta:
    local_reads = False  # every call is a network round trip

    def __init__(
        self,
        address: str,
        volume: str,
        *,
        token: Token | None = None,
        timeout: float = 10.0,
        listing_timeout: float = 120.0,
        tls: ClientTLS | None = None,
        reconnect: float = RECONNECT_SECONDS,
    ) -> None:
        """``reconnect``: how long a call waits for a server refusing connections
        (restarting) before EIO."""
        self._channel = open_channel(address, tls)
        self._tls = tls is not None
        self._reconnect = reconnect
        self._down = threading.Event()  # a call found the server gone and not back in time
        self._stub: Any = rpc.MetaServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._volume = volume
        self.session = uuid.uuid4().hex  # the server sends this mount's own changes to nobody
        self._token = token_source(token)
        self._session_metadata = ((SESSION_KEY, self.session),)
        self._timeout = timeout
        self._listing_timeout = listing_timeout
        self._closed = threading.Event()
        self._heartbeats: threading.Thread | None = None
        # releases made while one is in flight go out as one ReleaseMany
        self._releases = GroupedCalls(self._release_all, MAX_RELEASES)
        self._release_many = True  # until a server says it has no ReleaseMany
        self._dirs = KnownDirAttrs()  # directories as this mount's creates left them

    def start_session(self) -> None:
        """Open this mount's session now (errors surface here) and keep it alive.

        The server gives back the opens of a session that stops renewing (a
        mount that died) ``SESSION_TTL`` after its last heartbeat.
        """
        self.heartbeat()
        self._heartbeats = threading.Thread(target=self._renew, name="cloudfs-session", daemon=True)
        self._heartbeats.start()

    def heartbeat(self) -> None:
        """Renew the session now (``start_session`` keeps doing it)."""
        self._call("Heartbeat", pb.VolumeRef(volume=self._volume))

    def _renew(self) -> None:
        while not self._closed.wait(HEARTBEAT_SECONDS):
            try:
                self.heartbeat()
            except FsError as exc:
                log.warning("session heartbeat failed (%s); retrying", exc)

    def _call(self, name: str, request: Any, *, lists: bool = False) -> Any:
        if name not in KEEPS_DIR_ATTRS:
            self._dirs.clear()
        timeout = self._listing_timeout if lists else self._timeout
        started = time.monotonic()
        self._await_up(name)
        busy = iter(BUSY_PAUSES)
        while True:
            try:
                return call_with_token(
                    getattr(self._stub, name),
                    request,
                    timeout=timeout,
                    token=self._token,
                    extra=self._session_metadata,
                )
            except grpc.RpcError as exc:
                if not self._may_retry(exc, started, busy):
                    error = rpc_error(exc, name, timeout, tls=self._tls)
                    if self._down.is_set() and type(error) is RemoteIOError:
                        raise TreeUnreachable(str(error)) from None
                    raise error from None

    def _await_up(self, name: str) -> None:
        """After the server was found gone, wait up to ``reconnect`` seconds for the
        connection before sending: sent at once, a call would spend its deadline in
        gRPC's retries while the channel reconnects, and fail though the server is back."""
        if not self._down.is_set():
            return
        if not await_connected(self._channel, self._reconnect):
            raise TreeUnreachable(
                f"{name}: the tree service is unreachable (not back within {self._reconnect:g} s)"
            )
        self._down.clear()

    def reachable(self, seconds: float) -> bool:
        """Whether the server connects within ``seconds`` (a detached mount's probe)."""
        if not await_connected(self._channel, seconds):
            return False
        self._down.clear()
        return True

    def _may_retry(self, exc: grpc.RpcError, started: float, busy: Iterator[float]) -> bool:
        """Whether to send a call that failed unrun again, after waiting here.

        Busy (this host's share of the server taken): after each of ``BUSY_PAUSES``.
        Unreachable with the channel down (the server restarting: a pod rescheduled,
        an upgrade): once it connects again, within ``reconnect`` seconds of the
        first try, so a restart is a pause to the mount's callers rather than EIO.
        Not back in time: the next call first waits for the connection (``_await_up``).
        """
        if refused_busy(exc):
            pause = next(busy, None)
            if pause is not None:
                time.sleep(pause)
            return pause is not None
        if not unreachable(exc):
            return False
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED and await_connected(self._channel, 0.05):
            return False  # connected: the server is slow, not gone
        left = self._reconnect - (time.monotonic() - started)
        if left > 0 and await_connected(self._channel, left):
            return True
        self._down.set()
        return False

    def _attr(self, name: str, request: Any, *, lists: bool = False) -> Attr:
        return cv.attr_from_pb(self._call(name, request, lists=lists).attr)

    def _inode(self, inode: InodeId) -> pb.InodeRequest:
        return pb.InodeRequest(volume=self._volume, inode=inode)

    def _name(self, parent: InodeId, name: bytes) -> pb.NameRequest:
        return pb.NameRequest(volume=self._volume, parent=parent, name=name)

    # -- the Meta protocol ----------------------------------------------------

    def lookup(self, parent: InodeId, name: bytes) -> Attr:
        return self._attr("Lookup", self._name(parent, name), lists=True)

    def lookup_if_listed(self, parent: InodeId, name: bytes) -> Attr | None:
        reply = self._call("LookupIfListed", self._name(parent, name))
        return cv.attr_from_pb(reply.attr) if reply.HasField("attr") else None

    def getattr(self, inode: InodeId) -> Attr:
        known = self._dirs.get(inode)
        return known if known is not None else self._attr("GetAttr", self._inode(inode))

    def setattr(self, inode: InodeId, changes: AttrChanges) -> Attr:
        request = pb.SetAttrRequest(
            volume=self._volume, inode=inode, changes=cv.changes_to_pb(changes)
        )
        return self._attr("SetAttr", request)

    def readdir(self, inode: InodeId, after: bytes | None, limit: int) -> list[DirEntry]:
        request = pb.ReadDirRequest(volume=self._volume, inode=inode, after=after, limit=limit)
        return cv.entries_from_pb(self._call("ReadDir", request, lists=True))

    def create(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int, rdev: int = 0
    ) -> Attr:
        request = pb.CreateRequest(
            volume=self._volume, parent=parent, name=name, mode=mode, uid=uid, gid=gid, rdev=rdev
        )
        return self._attr("Create", request, lists=True)

    def create_if_ready(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int
    ) -> Attr | None:
        return None  # a network round trip: never inline (create_open is the one call)

    def create_open(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int
    ) -> tuple[Attr, str]:
        request = pb.CreateRequest(
            volume=self._volume, parent=parent, name=name, mode=mode, uid=uid, gid=gid
        )
        generation = self._dirs.generation
        reply = self._call("CreateOpen", request, lists=True)
        if reply.HasField("parent"):  # the kernel asks for them before the next create
            self._dirs.remember(cv.attr_from_pb(reply.parent), generation)
        return cv.attr_from_pb(reply.attr), reply.key.decode("utf-8", "surrogateescape")

    def mkdir(self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int) -> Attr:
        request = pb.CreateRequest(
            volume=self._volume, parent=parent, name=name, mode=mode, uid=uid, gid=gid
        )
        return self._attr("Mkdir", request, lists=True)

    def reserve_inodes(self, count: int) -> int:
        """``count`` inode numbers for ``create_at``; the first."""
        reply = self._call(
            "ReserveInodes", pb.ReserveInodesRequest(volume=self._volume, count=count)
        )
        first: int = reply.first
        return first

    def create_at(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int, inode: InodeId
    ) -> Attr:
        """A file or directory (by ``mode``) under ``inode``, from ``reserve_inodes``."""
        request = pb.CreateRequest(
            volume=self._volume, parent=parent, name=name, mode=mode, uid=uid, gid=gid,
            inode=inode,
        )  # fmt: skip
        return self._attr("CreateAt", request, lists=True)

    def symlink(self, parent: InodeId, name: bytes, target: bytes, uid: int, gid: int) -> Attr:
        request = pb.SymlinkRequest(
            volume=self._volume, parent=parent, name=name, target=target, uid=uid, gid=gid
        )
        return self._attr("Symlink", request, lists=True)

    def readlink(self, inode: InodeId) -> bytes:
        value: bytes = self._call("ReadLink", self._inode(inode)).value
        return value

    def link(self, inode: InodeId, new_parent: InodeId, new_name: bytes) -> Attr:
        request = pb.LinkRequest(
            volume=self._volume, inode=inode, new_parent=new_parent, new_name=new_name
        )
        return self._attr("Link", request, lists=True)

    def unlink(self, parent: InodeId, name: bytes) -> Attr:
        return self._attr("Unlink", self._name(parent, name), lists=True)

    def rmdir(self, parent: InodeId, name: bytes) -> None:
        self._call("Rmdir", self._name(parent, name), lists=True)

    def rename(
        self, parent: InodeId, name: bytes, new_parent: InodeId, new_name: bytes, flags: int = 0
    ) -> None:
        request = pb.RenameRequest(
            volume=self._volume, parent=parent, name=name, new_parent=new_parent,
            new_name=new_name, flags=flags,
        )  # fmt: skip
        self._call("Rename", request, lists=True)

    def getxattr(self, inode: InodeId, name: bytes) -> bytes:
        request = pb.XattrRequest(volume=self._volume, inode=inode, name=name)
        value: bytes = self._call("GetXattr", request).value
        return value

    def setxattr(self, inode: InodeId, name: bytes, value: bytes, flags: int = 0) -> None:
        request = pb.XattrRequest(
            volume=self._volume, inode=inode, name=name, value=value, flags=flags
        )
        self._call("SetXattr", request)

    def listxattr(self, inode: InodeId) -> list[bytes]:
        return list(self._call("ListXattr", self._inode(inode)).names)

    def removexattr(self, inode: InodeId, name: bytes) -> None:
        self._call("RemoveXattr", pb.XattrRequest(volume=self._volume, inode=inode, name=name))

    def statfs(self) -> FsStats:
        return cv.stats_from_pb(self._call("StatFs", pb.VolumeRef(volume=self._volume)).stats)

    def refresh(self, inode: InodeId) -> Invalidation:
        return cv.invalidation_from_pb(self._call("Refresh", self._inode(inode)))

    def object_key(self, inode: InodeId, *, upload: bool = False) -> str:
        value: bytes = self._call("ObjectKey", self._inode(inode)).value
        return value.decode("utf-8", "surrogateescape")

    def open(self, inode: InodeId, *, write: bool = False) -> Attr:
        return self._attr("Open", self._inode(inode))

    def release(self, inode: InodeId) -> None:
        self._releases.call(inode)

    def _release_all(self, inodes: list[InodeId]) -> None:
        if len(inodes) > 1 and self._release_many:
            try:
                self._call("ReleaseMany", pb.InodesRequest(volume=self._volume, inodes=inodes))
                return
            except FsError as exc:
                if exc.errno != errno.ENOSYS:
                    raise
                log.info("the tree server has no ReleaseMany (older): releases go one by one")
                self._release_many = False
        for inode in inodes:  # a lone release, or a server that knows only Release
            self._call("Release", self._inode(inode))

    def commit_upload(
        self, inode: InodeId, size: int, mtime_ns: int, etag: str, key: str | None = None
    ) -> Attr:
        request = pb.CommitUploadRequest(
            volume=self._volume,
            inode=inode,
            size=size,
            mtime_ns=mtime_ns,
            etag=etag,
            key=(key or "").encode("utf-8", "surrogateescape"),
        )
        return self._attr("CommitUpload", request)

    def commit_pending(self, inode: InodeId, size: int, mtime_ns: int) -> Attr:
        request = pb.CommitPendingRequest(
            volume=self._volume, inode=inode, size=size, mtime_ns=mtime_ns
        )
        return self._attr("CommitPending", request)

    def changes(self) -> Iterator[Invalidation]:
        """Other mounts' changes as they commit (heartbeats skipped); raises on a broken stream."""
        request = pb.WatchRequest(volume=self._volume, session=self.session)
        try:
            stream = call_with_token(
                self._stub.Watch, request, timeout=None, token=self._token,
                extra=self._session_metadata,
            )  # fmt: skip
            for message in stream:
                if not (message.inodes or message.entries or message.lost):
                    continue  # a heartbeat
                changed = cv.invalidation_from_pb(message)
                if changed.lost:
                    self._dirs.clear()
                else:  # before the mount hears of it: its next getattr asks the service
                    self._dirs.forget([*changed.inodes, *(p for p, _ in changed.entries)])
                yield changed
        except grpc.RpcError as exc:
            raise rpc_error(exc, "Watch", 0, tls=self._tls) from None

    def close(self) -> None:
        """End the session (its opens are given back at once) and the connection."""
        self._closed.set()
        if self._heartbeats is not None:
            try:
                call_with_token(
                    self._stub.EndSession,
                    pb.VolumeRef(volume=self._volume),
                    timeout=5.0,
                    token=self._token,
                    extra=self._session_metadata,
                )
            except grpc.RpcError as exc:  # it expires on its own
                log.info("could not end the session: %s", exc)
        self._channel.close()
