"""DetachedReads: a mount's reads outlive the tree service.

It wraps the tree service's client (``GrpcMeta``) and remembers every answer to a
read (lookups, negative ones too, attributes, listings, link targets, xattrs,
object keys, statfs), at most ``max_entries`` of them (a listing page counts
one per name), the least recently used dropped first. When a call finds every
tree server unreachable (``TreeUnreachable``: not back within the client's
reconnect wait), the mount runs *detached*:

* reads are answered at once from what it remembers, for as long as the outage
  lasts: a file it looked up or opened before stays readable (its data comes
  from the caches and the UFS as usual) and a directory it listed stays
  listable; something it never asked about fails with EIO at once, never after
  a wait;
* opens for reading and releases of remembered files are answered locally (the
  server's session gives back the opens of a mount it stops hearing from); an
  open for writing fails with EIO at once, not at a close whose error a writer
  may ignore;
* changes still go to the service: each waits up to the reconnect bound and
  then fails with EIO; a write-back mount wraps this class in ``DetachedWrites``
  (``detached_writes.py``), which journals them instead.

A probe asks every ``probe_seconds`` whether the service connects again; once a
heartbeat passes, the mount is attached again (logged, as the detach is;
``detached_since``, the ``cloudfs_tree_detached`` gauge).

What is remembered (the last answer to each read, updated by the mount's own
changes) serves only while detached; other mounts' invalidations drop nothing (a
UFS listing sends them for every directory it fills).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from cloudfs.errors import FsError, NotFound, TreeUnreachable
from cloudfs.meta.client.answers import MISS, Answers, Key
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.interface import Invalidation
from cloudfs.types import Attr, AttrChanges, DirEntry, FsStats, InodeId

log = logging.getLogger(__name__)

MAX_ENTRIES = 500_000  # a few hundred bytes each
PROBE_SECONDS = 1.0
T = TypeVar("T")


class DetachedReads:
    local_reads = False

    def __init__(
        self,
        tree: GrpcMeta,
        *,
        max_entries: int = MAX_ENTRIES,
        probe_seconds: float = PROBE_SECONDS,
        on_detached: Callable[[bool], None] | None = None,
    ) -> None:
        """``on_detached(True/False)``: told when the mount detaches and attaches again."""
        self._tree = tree
        self._probe_seconds = probe_seconds
        self._on_detached = on_detached
        self._memory = Answers(max_entries)
        self._lock = threading.Lock()
        self._detached_since: float | None = None  # time.time() when it detached
        self._closed = threading.Event()
        self.on_attached: list[Callable[[], None]] = []  # called when it is back

    # -- the session, as GrpcMeta's ------------------------------------------------

    @property
    def session(self) -> str:
        return self._tree.session

    def start_session(self) -> None:
        self._tree.start_session()

    def changes(self) -> Iterator[Invalidation]:
        return self._tree.changes()

    def close(self) -> None:
        self._closed.set()
        self._tree.close()

    # -- detached or not -------------------------------------------------------------

    @property
    def detached_since(self) -> float | None:
        """When the mount detached (``time.time()``), None while attached."""
        return self._detached_since

    def _detach(self, why: FsError) -> None:
        with self._lock:
            if self._detached_since is not None:
                return
            self._detached_since = time.time()
            self._memory.answered = 0
            known = self._memory.size
        log.warning(
            "tree service unreachable (%s): running detached, reads answered from the %d "
            "entries this mount knows; changes fail with EIO until it is back (journaled "
            "in write-back)",
            why, known,
        )  # fmt: skip
        if self._on_detached is not None:
            self._on_detached(True)
        threading.Thread(target=self._probe, name="cloudfs-detached", daemon=True).start()

    def _probe(self) -> None:
        while not self._closed.wait(self._probe_seconds):
            if not self._tree.reachable(self._probe_seconds):
                continue
            try:
                self._tree.heartbeat()  # renews the session, or opens it again
            except FsError as exc:
                log.debug("the tree service answers but the heartbeat failed: %s", exc)
                continue
            with self._lock:
                since, self._detached_since = self._detached_since, None
                answered = self._memory.answered
            log.warning(
                "tree service back after %.0f s detached (%d reads answered locally meanwhile)",
                time.time() - (since or time.time()), answered,
            )  # fmt: skip
            if self._on_detached is not None:
                self._on_detached(False)
            for hook in self.on_attached:
                hook()
            return

    def forget(
        self, inodes: tuple[InodeId, ...], entries: tuple[tuple[InodeId, bytes], ...]
    ) -> None:
        """Drop what a change made elsewhere (a replayed create) makes stale."""
        self._memory.forget(inodes, entries)

    def _read(self, key: Key, call: Callable[[], T]) -> T:
        if self._detached_since is None:
            try:
                value = call()
            except TreeUnreachable as exc:
                self._detach(exc)
            except NotFound as exc:
                if key[0] == "lookup":
                    self._memory.remember(key, exc)
                raise
            else:
                self._memory.remember(key, value)
                return value
        answer: T = self._answer(key)
        return answer

    def _answer(self, key: Key) -> Any:
        value = self._memory.recall(key)
        if value is MISS:
            raise TreeUnreachable(
                f"{key[0]}: not known to this mount, and the tree service is unreachable"
            )
        if isinstance(value, FsError):
            raise copy.copy(value)
        return value

    def _change(
        self,
        call: Callable[[], T],
        inodes: tuple[InodeId, ...] = (),
        entries: tuple[tuple[InodeId, bytes], ...] = (),
        learn: Callable[[T], None] | None = None,
    ) -> T:
        """A change goes to the service (waiting up to its reconnect bound); what it
        touches is forgotten, then ``learn`` remembers what its answer says. Unreachable,
        it was most likely not made: what the mount knew stays (a journal builds on it)."""
        try:
            result = call()
        except TreeUnreachable as exc:
            self._detach(exc)
            raise
        except BaseException:
            self._memory.forget(inodes, entries)
            raise
        self._memory.forget(inodes, entries)
        if learn is not None:
            learn(result)
        return result

    def _learn_attr(self, attr: Attr) -> None:
        self._memory.remember(("getattr", attr.inode), attr)

    def _learn_name(self, parent: InodeId, name: bytes) -> Callable[[Attr], None]:
        def learn(attr: Attr) -> None:
            self._memory.remember(("lookup", parent, name), attr)
            self._memory.remember(("getattr", attr.inode), attr)

        return learn

    # -- reads -----------------------------------------------------------------------

    def lookup(self, parent: InodeId, name: bytes) -> Attr:
        attr = self._read(("lookup", parent, name), lambda: self._tree.lookup(parent, name))
        if self._detached_since is not None:  # its attributes as this mount last saw them
            newer = self._memory.recall(("getattr", attr.inode))
            return newer if isinstance(newer, Attr) else attr
        self._memory.remember(("getattr", attr.inode), attr)
        return attr

    def lookup_if_listed(self, parent: InodeId, name: bytes) -> Attr | None:
        if self._detached_since is not None:
            try:
                return self.lookup(parent, name)
            except NotFound:
                return None
        try:
            attr = self._tree.lookup_if_listed(parent, name)
        except TreeUnreachable as exc:
            self._detach(exc)
            return self.lookup_if_listed(parent, name)
        if attr is not None:
            self._memory.remember(("lookup", parent, name), attr)
        return attr

    def getattr(self, inode: InodeId) -> Attr:
        return self._read(("getattr", inode), lambda: self._tree.getattr(inode))

    def readdir(self, inode: InodeId, after: bytes | None, limit: int) -> list[DirEntry]:
        entries = self._read(
            ("readdir", inode, after, limit), lambda: self._tree.readdir(inode, after, limit)
        )
        for entry in entries:
            self._memory.remember(("lookup", inode, entry.name), entry.attr)
        return entries

    def readlink(self, inode: InodeId) -> bytes:
        return self._read(("readlink", inode), lambda: self._tree.readlink(inode))

    def getxattr(self, inode: InodeId, name: bytes) -> bytes:
        return self._read(("getxattr", inode, name), lambda: self._tree.getxattr(inode, name))

    def listxattr(self, inode: InodeId) -> list[bytes]:
        return self._read(("listxattr", inode), lambda: self._tree.listxattr(inode))

    def statfs(self) -> FsStats:
        return self._read(("statfs",), self._tree.statfs)

    def object_key(self, inode: InodeId, *, upload: bool = False) -> str:
        return self._read(("object_key", inode), lambda: self._tree.object_key(inode))

    def open(self, inode: InodeId, *, write: bool = False) -> Attr:
        """While detached: answered locally for reading; a writer is refused now (EIO),
        not at its close, whose error writers often ignore."""
        if self._detached_since is None:
            try:
                attr = self._tree.open(inode, write=write)
            except TreeUnreachable as exc:
                self._detach(exc)
            else:
                self._memory.remember(("getattr", inode), attr)
                return attr
        if write:
            raise TreeUnreachable("open for writing: the tree service is unreachable")
        known: Attr = self._answer(("getattr", inode))
        return known

    def release(self, inode: InodeId) -> None:
        if self._detached_since is not None:
            return  # its open was counted by a session the server gives back
        try:
            self._tree.release(inode)
        except TreeUnreachable as exc:
            self._detach(exc)

    def refresh(self, inode: InodeId) -> Invalidation:
        return self._change(lambda: self._tree.refresh(inode), (inode,))

    # -- changes ---------------------------------------------------------------------

    def setattr(self, inode: InodeId, changes: AttrChanges) -> Attr:
        return self._change(
            lambda: self._tree.setattr(inode, changes), (inode,), learn=self._learn_attr
        )

    def create(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int, rdev: int = 0
    ) -> Attr:
        return self._change(
            lambda: self._tree.create(parent, name, mode, uid, gid, rdev),
            (),
            ((parent, name),),
            self._learn_name(parent, name),
        )

    def create_if_ready(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int
    ) -> Attr | None:
        return None  # the tree service's: never inline

    def create_open(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int
    ) -> tuple[Attr, str]:
        def learn(made: tuple[Attr, str]) -> None:
            attr, key = made
            self._learn_name(parent, name)(attr)
            self._memory.remember(("object_key", attr.inode), key)
            # the directory's key, which a create while detached builds on
            self._memory.remember(("object_key", parent), key.rpartition("/")[0])

        return self._change(
            lambda: self._tree.create_open(parent, name, mode, uid, gid),
            (),
            ((parent, name),),
            learn,
        )

    def mkdir(self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int) -> Attr:
        return self._change(
            lambda: self._tree.mkdir(parent, name, mode, uid, gid),
            (),
            ((parent, name),),
            self._learn_name(parent, name),
        )

    def symlink(self, parent: InodeId, name: bytes, target: bytes, uid: int, gid: int) -> Attr:
        return self._change(
            lambda: self._tree.symlink(parent, name, target, uid, gid), (), ((parent, name),)
        )

    def link(self, inode: InodeId, new_parent: InodeId, new_name: bytes) -> Attr:
        return self._change(
            lambda: self._tree.link(inode, new_parent, new_name),
            (inode,),
            ((new_parent, new_name),),
        )

    def unlink(self, parent: InodeId, name: bytes) -> Attr:
        attr = self._change(lambda: self._tree.unlink(parent, name), (), ((parent, name),))
        self._memory.forget((attr.inode,), ())
        self._memory.forget_keys(attr)
        self._memory.remember(("lookup", parent, name), NotFound(f"{name!r}"))
        return attr

    def rmdir(self, parent: InodeId, name: bytes) -> None:
        self._change(lambda: self._tree.rmdir(parent, name), (), ((parent, name),))

    def rename(
        self, parent: InodeId, name: bytes, new_parent: InodeId, new_name: bytes, flags: int = 0
    ) -> None:
        moved = self._memory.peek(("lookup", parent, name))
        other = self._memory.peek(("lookup", new_parent, new_name)) if flags else None

        def learn(_: None) -> None:  # the keys below what moved, the names it left
            self._memory.forget_keys(moved)
            if flags:  # an exchange moves the other name too
                self._memory.forget_keys(other)
            elif isinstance(moved, Attr):
                self._memory.remember(("lookup", new_parent, new_name), moved)
                self._memory.remember(("lookup", parent, name), NotFound(f"{name!r}"))

        entries = ((parent, name), (new_parent, new_name))
        self._change(
            lambda: self._tree.rename(parent, name, new_parent, new_name, flags), (), entries, learn
        )

    def setxattr(self, inode: InodeId, name: bytes, value: bytes, flags: int = 0) -> None:
        self._change(lambda: self._tree.setxattr(inode, name, value, flags), (inode,))

    def removexattr(self, inode: InodeId, name: bytes) -> None:
        self._change(lambda: self._tree.removexattr(inode, name), (inode,))

    def commit_upload(
        self, inode: InodeId, size: int, mtime_ns: int, etag: str, key: str | None = None
    ) -> Attr:
        return self._change(
            lambda: self._tree.commit_upload(inode, size, mtime_ns, etag, key),
            (inode,),
            learn=self._learn_attr,
        )

    def commit_pending(self, inode: InodeId, size: int, mtime_ns: int) -> Attr:
        return self._change(
            lambda: self._tree.commit_pending(inode, size, mtime_ns),
            (inode,),
            learn=self._learn_attr,
        )
