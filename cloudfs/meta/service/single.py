"""One mount's own tree as the only volume of a ``TreeServer`` (``cloudfs:///MOUNTPOINT``).

An embedded mount (``cloudfs mount s3://bucket /mnt/data``) keeps its tree in
an ``EmbeddedMeta`` inside the mount process. So that a process on the node
without FUSE (a ``cloudfs:///mnt/data/...`` fsspec user, a forked DataLoader
worker) sees and changes the same tree, the mount serves it with the very
service ``cloudfs meta serve`` runs (``TreeServer``), on a UNIX socket: this
module presents the one ``EmbeddedMeta`` as the volume ``LOCAL_VOLUME`` with
what the server needs of ``Volumes`` (``VolumeSet``). Clients reach it with
the ordinary tree client (``GrpcMeta`` on ``unix:PATH``): one protocol.

Writes through the socket must reach the mount's own readers, whose kernel
caches names and attributes: the mount builds its tree over
``WatchedKV(engine, MountFeed)``, so every committed write transaction is
published with the session that made it (``changes.origin``). The mount's own
FUSE calls run in no session; every call through the socket carries its
client's session (``GrpcMeta`` sends one). ``MountFeed`` hands the changes of
sessions to ``drop`` (the queue the mount's ``Invalidator`` follows), which
tells the kernel to forget them, as a ``grpc://`` mount is told of another
mount's commits. The mount's own writes are not sent back to it.

Thread safety: ``EmbeddedMeta`` is thread-safe (``Meta``: the ``cloudfs meta
serve`` process calls one from hundreds of gRPC threads); the mount calls it
from trio's worker threads and inline for LMDB reads, the server from its
pool. LMDB serializes writers; the namespace lock serializes namespace changes.

A read-only mount's socket refuses every change (``RefuseChanges``, EROFS),
as its FUSE side does.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

import grpc

from cloudfs.errors import NotFound, NotPermitted
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine.kv import KVEngine
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.meta.interface import Invalidation
from cloudfs.meta.service.changes import Change, ChangeFeed
from cloudfs.meta.wire import convert as cv
from cloudfs.meta.wire.constants import ERRNO_KEY
from cloudfs.meta.wire.volumes import VolumeSpec
from cloudfs.types import InodeId

LOCAL_VOLUME = "local"

# The MetaService calls that change the tree (a read-only mount refuses them).
CHANGING_RPCS = frozenset(
    {
        "SetAttr", "Create", "CreateOpen", "Mkdir", "Symlink", "Link", "Unlink", "Rmdir",
        "Rename", "ReserveInodes", "CreateAt",
        "SetXattr", "RemoveXattr", "CommitUpload", "CommitPending",
    }
)  # fmt: skip


class MountFeed(ChangeFeed):
    """The change feed of a mount's tree: what a client of the socket commits also goes
    to the mount's kernel (``drop``: must not block)."""

    def __init__(self, drop: Callable[[Invalidation], None]) -> None:
        super().__init__()
        self._drop = drop

    def publish(self, change: Change) -> None:
        super().publish(change)  # Watch streams of the socket's clients
        if change.origin:  # a session: a call through the socket, not the mount's own
            self._drop(invalidation_of(change))


def invalidation_of(change: Change) -> Invalidation:
    """A committed ``Change`` as what the kernel must forget."""
    return Invalidation(
        tuple(InodeId(i) for i in sorted(change.inodes)),
        tuple((InodeId(p), n) for p, n in sorted(change.entries)),
        lost=change.lost,
    )


class SingleVolume:
    """``tree`` as the one volume ``spec.name`` of a ``TreeServer`` (a ``VolumeSet``).

    The set is fixed: creating or deleting volumes is refused (EPERM). Cache
    groups, which the server keeps in its engine, live in memory here: mounts
    join groups on a tree service, never on a mount's socket.
    """

    def __init__(self, tree: EmbeddedMeta, feed: ChangeFeed, spec: VolumeSpec) -> None:
        self._tree = tree
        self._feed = feed
        self._spec = spec
        self._groups = MemoryKV()

    @property
    def engine(self) -> KVEngine:
        return self._groups

    def create(self, spec: VolumeSpec) -> VolumeSpec:
        raise NotPermitted("a mount's tree is one volume: no volume can be created on it")

    def get(self, name: str) -> VolumeSpec:
        if name != self._spec.name:
            raise NotFound(f"no volume {name!r}: a mount's tree is volume {self._spec.name!r}")
        return self._spec

    def list(self) -> list[VolumeSpec]:
        return [self._spec]

    def delete(self, name: str) -> None:
        self.get(name)
        raise NotPermitted("a mount's tree cannot be deleted through its socket")

    def tree(self, name: str) -> EmbeddedMeta:
        self.get(name)
        return self._tree

    def feed(self, name: str) -> ChangeFeed:
        self.get(name)
        return self._feed


class RefuseChanges(grpc.ServerInterceptor):  # type: ignore[misc]  # grpc is untyped here
    """Answer every call that would change the tree with EROFS (a read-only mount)."""

    def intercept_service(
        self, continuation: Callable[[Any], Any], handler_call_details: Any
    ) -> Any:
        method = str(handler_call_details.method)  # "/cloudfs.v1.MetaService/Create"
        if method.rpartition("/")[2] not in CHANGING_RPCS:
            return continuation(handler_call_details)
        return grpc.unary_unary_rpc_method_handler(_refuse)


def _refuse(request: bytes, context: grpc.ServicerContext) -> None:
    context.set_trailing_metadata(((ERRNO_KEY, str(errno.EROFS)),))
    context.abort(cv.status_of(errno.EROFS), "the mount is read-only")
