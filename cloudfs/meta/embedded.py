"""EmbeddedMeta: the Meta protocol served in-process, over a KV engine and the UFS.

This class only adds concurrency control to the tree operations in
``cloudfs.meta.engine``: it makes directories fresh from the UFS before an
operation reads or changes them (``DirectoryLoader``). Namespace changes take
no volume-wide lock: each is one transaction, or, when it calls the UFS
between plan and commit (mkdir, unlink, rmdir, rename), two transactions
that reserve the names and inodes it changes meanwhile (``reserve``), so
changes of different names never wait for each other. Two things still take
the namespace lock (over etcd shared by every tree server: ``ns_lock``): a
rename that moves a directory present in the UFS (it changes every key below
it), and the merge of a UFS listing.

With ``revalidate`` (the mount and the tree service turn it on), lookups and
readdirs of a directory listed before are answered from its listing even past
the TTL while it is listed again in the background (``loader``). What a
listing changes is queued for ``changes()``: an ``EmbeddedMeta`` is a
``ChangeSource``, so the mount's ``Invalidator`` can drop it from the kernel.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from cloudfs.errors import InvalidArgument
from cloudfs.meta.change_queue import ChangeQueue
from cloudfs.meta.engine import (
    codec,
    inode_numbers,
    ops_attr,
    ops_create,
    ops_read,
    ops_remove,
    ops_rename,
    ops_session,
    tree,
)
from cloudfs.meta.engine.context import TreeContext
from cloudfs.meta.engine.kv import KVEngine
from cloudfs.meta.engine.kv_retry import write_txn
from cloudfs.meta.engine.loader import DirectoryLoader
from cloudfs.meta.engine.names import validate_name
from cloudfs.meta.engine.ns_lock import Mutex, NamespaceLock
from cloudfs.meta.engine.ops_volume import init_volume
from cloudfs.meta.engine.settings import TreeSettings
from cloudfs.meta.interface import Invalidation
from cloudfs.types import Attr, AttrChanges, DirEntry, FsStats, InodeId
from cloudfs.ufs.interface import ObjectStore

T = TypeVar("T")
MAX_RESERVED_INODES = 4096  # per reserve_inodes call


class TreeDefaults(Protocol):
    """What a tree gives what its UFS listing reveals, and when it lists again: a mount's
    ``MountConfig`` and a tree-service volume's ``VolumeSpec`` both carry these."""

    @property
    def meta_ttl(self) -> float: ...
    @property
    def default_uid(self) -> int: ...
    @property
    def default_gid(self) -> int: ...
    @property
    def file_mode(self) -> int: ...
    @property
    def dir_mode(self) -> int: ...


class EmbeddedMeta:
    local_reads = True  # LMDB reads never wait for a writer or for the UFS

    """``cloudfs.meta.interface.Meta`` over ``engine``, mirroring ``store``.

    Args:
        engine: the KV engine holding the tree (``LmdbKV``, ``MemoryKV``); closed by ``close``.
        store: the UFS; not closed by ``close``.
        ttl: seconds after which a listed directory is listed again.
        default_uid, default_gid, file_mode, dir_mode: owner and permission bits of
            what the UFS listing reveals (and of the root when the tree is new).
        clock: nanoseconds since the epoch; tests inject a fake one.
        shared: served by the tree service to many mounts: open counts belong to
            sessions (``ops_session``) and survive a restart of this process.
        ns_mutex: the engine's cross-server lock of this tree (``SharedKV.mutex``),
            when other tree servers change it too.
        revalidate: serve a listing older than ``ttl`` to readers at once while
            listing the directory again behind them (stale-while-revalidate), in
            up to ``background_listings`` threads; ``close`` stops them.
        on_listing_change: where what a UFS listing changed goes (it must not
            block); by default to this Meta's own queue, read by ``changes()``.
    """

    def __init__(
        self,
        engine: KVEngine,
        store: ObjectStore,
        *,
        ttl: float,
        default_uid: int = 0,
        default_gid: int = 0,
        file_mode: int = 0o644,
        dir_mode: int = 0o755,
        clock: Callable[[], int] = time.time_ns,
        shared: bool = False,
        ns_mutex: Mutex | None = None,
        revalidate: bool = False,
        background_listings: int = 4,
        on_listing_change: Callable[[Invalidation], None] | None = None,
    ) -> None:
        settings = TreeSettings(
            ttl_ns=ttl * 1e9,
            default_uid=default_uid,
            default_gid=default_gid,
            file_mode=file_mode,
            dir_mode=dir_mode,
            lazy_dir_times=ns_mutex is not None,
        )
        self._ctx = TreeContext(engine, store, settings, clock)
        self._ns_lock = NamespaceLock(ns_mutex)
        self._changes = ChangeQueue()
        self._loader = DirectoryLoader(
            self._ctx,
            self._ns_lock,
            revalidate=revalidate,
            background_listings=background_listings,
            on_change=on_listing_change or self._changes.put,
        )
        init_volume(self._ctx, shared=shared)

    @classmethod
    def with_defaults(
        cls, engine: KVEngine, store: ObjectStore, defaults: TreeDefaults, **options: Any
    ) -> EmbeddedMeta:
        """An ``EmbeddedMeta`` whose TTL, owner and modes are ``defaults``'s; ``options``: the
        other keyword arguments of the constructor."""
        return cls(
            engine,
            store,
            ttl=defaults.meta_ttl,
            default_uid=defaults.default_uid,
            default_gid=defaults.default_gid,
            file_mode=defaults.file_mode,
            dir_mode=defaults.dir_mode,
            **options,
        )

    def _fresh_child_dir(self, parent: InodeId, name: bytes) -> None:
        """Make ``name`` fresh if it is a directory (rmdir and rename check its emptiness)."""
        with self._ctx.kv.transaction(write=False) as txn:
            ino = tree.child(txn, parent, name)
            rec = None if ino is None else tree.find(txn, ino)
        if ino is not None and rec is not None and tree.is_dir(rec):
            self._loader.ensure_fresh(ino)

    def _fresh_for_rename(self, parent: InodeId, new_parent: InodeId, new_name: bytes) -> None:
        """List both directories if due, and a directory the rename would replace (its
        emptiness is checked), asking the tree once where none is due (three reads
        before: one round trip each over etcd)."""
        with self._ctx.kv.transaction(write=False) as txn:
            txn.get_many(
                [
                    codec.inode_key(parent),
                    codec.inode_key(new_parent),
                    codec.dentry_key(new_parent, new_name),
                ]
            )
            due = [
                d for d in (parent, new_parent) if not self._loader.is_fresh(tree.load_dir(txn, d))
            ]
            ino = tree.child(txn, new_parent, new_name)
            rec = None if ino is None else tree.find(txn, ino)
        for directory in dict.fromkeys(due):
            self._loader.ensure_fresh(directory)
        if due:  # a listing may have changed what the new name holds
            self._fresh_child_dir(new_parent, new_name)
        elif ino is not None and rec is not None and tree.is_dir(rec):
            self._loader.ensure_fresh(ino)

    def _listed_first(self, parent: InodeId, change: Callable[[tree.Listed], T]) -> T:
        """``change(listed)``, a change that adds or removes a name in ``parent``, checking
        in its own transaction that ``parent`` is listed (no read of its own first: one
        round trip less over etcd); if it is due, list it, then run the change unchecked."""
        try:
            return change(self._loader.is_fresh)
        except tree.DueForListing:
            self._loader.ensure_fresh(parent)
            return change(None)

    def lookup(self, parent: InodeId, name: bytes) -> Attr:
        found = self.lookup_if_listed(parent, name)  # validates the name
        if found is not None:
            return found
        self._loader.ensure_fresh(parent)  # the parent must be listed first
        return ops_read.lookup(self._ctx, parent, name)

    def lookup_if_listed(self, parent: InodeId, name: bytes) -> Attr | None:
        validate_name(name)
        return ops_read.lookup_if_fresh(
            self._ctx, parent, name, lambda rec: self._loader.servable(parent, rec)
        )

    def getattr(self, inode: InodeId) -> Attr:
        return ops_read.getattr(self._ctx, inode)

    def setattr(self, inode: InodeId, changes: AttrChanges) -> Attr:
        return ops_attr.setattr(self._ctx, inode, changes)

    def refresh(self, inode: InodeId) -> Invalidation:
        with self._ctx.kv.transaction(write=False) as txn:
            tree.load_dir(txn, inode)  # NotFound, NotADirectory
        return self._loader.refresh(inode)

    def readdir(self, inode: InodeId, after: bytes | None, limit: int) -> list[DirEntry]:
        self._loader.ensure_listed(inode)
        return ops_read.readdir(self._ctx, inode, after, limit)

    def create(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int, rdev: int = 0
    ) -> Attr:
        validate_name(name)
        return self._listed_first(
            parent,
            lambda listed: ops_create.create(
                self._ctx, parent, name, mode, uid, gid, rdev, listed
            ),
        )

    def create_if_ready(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int
    ) -> Attr | None:
        validate_name(name)
        listed = self._loader.is_fresh
        return ops_create.create_now(self._ctx, parent, name, mode, uid, gid, listed)

    def create_open(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int, session: str = ""
    ) -> tuple[Attr, str]:
        """``session``: the mount holding it, when the tree service serves this tree."""
        added = self.create_open_and_parent(parent, name, mode, uid, gid, session)
        return added.attr, added.key

    def create_open_and_parent(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int, session: str = ""
    ) -> ops_create.Added:
        """``create_open``, and the directory's attributes once the file is in it (the
        service's CreateOpen sends them: the kernel asks for them next)."""
        validate_name(name)
        return self._listed_first(
            parent,
            lambda listed: ops_create.create_open(
                self._ctx, parent, name, mode, uid, gid, session, listed
            ),
        )

    def mkdir(self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int) -> Attr:
        validate_name(name)
        return self._listed_first(
            parent,
            lambda listed: ops_create.mkdir(self._ctx, parent, name, mode, uid, gid, listed),
        )

    def reserve_inodes(self, count: int) -> int:
        """``count`` inode numbers no create will pick, for ``create_at``; the first."""
        if not 0 < count <= MAX_RESERVED_INODES:
            raise InvalidArgument(f"reserve {count} inodes (1 to {MAX_RESERVED_INODES})")
        return write_txn(self._ctx.kv, lambda txn: inode_numbers.reserve(txn, count))

    def create_at(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int, inode: InodeId
    ) -> Attr:
        """A file or directory (by ``mode``) under ``inode``, reserved by ``reserve_inodes``."""
        validate_name(name)
        return self._listed_first(
            parent,
            lambda listed: ops_create.create_at(
                self._ctx, parent, name, mode, uid, gid, inode, listed
            ),
        )

    def symlink(self, parent: InodeId, name: bytes, target: bytes, uid: int, gid: int) -> Attr:
        validate_name(name)
        return self._listed_first(
            parent,
            lambda listed: ops_create.symlink(self._ctx, parent, name, target, uid, gid, listed),
        )

    def readlink(self, inode: InodeId) -> bytes:
        return ops_read.readlink(self._ctx, inode)

    def link(self, inode: InodeId, new_parent: InodeId, new_name: bytes) -> Attr:
        validate_name(new_name)
        return self._listed_first(
            new_parent,
            lambda listed: ops_create.link(self._ctx, inode, new_parent, new_name, listed),
        )

    def unlink(self, parent: InodeId, name: bytes) -> Attr:
        validate_name(name)
        return self._listed_first(
            parent, lambda listed: ops_remove.unlink(self._ctx, parent, name, listed)
        )

    def rmdir(self, parent: InodeId, name: bytes) -> None:
        validate_name(name)
        self._loader.ensure_fresh(parent)
        self._fresh_child_dir(parent, name)
        ops_remove.rmdir(self._ctx, parent, name)

    def rename(
        self, parent: InodeId, name: bytes, new_parent: InodeId, new_name: bytes, flags: int = 0
    ) -> None:
        validate_name(name)
        validate_name(new_name)
        self._fresh_for_rename(parent, new_parent, new_name)
        moved, replaced = ops_rename.rename(
            self._ctx, parent, name, new_parent, new_name, flags, self._ns_lock
        )
        self._loader.bump(moved, replaced)

    def getxattr(self, inode: InodeId, name: bytes) -> bytes:
        return ops_attr.getxattr(self._ctx, inode, name)

    def setxattr(self, inode: InodeId, name: bytes, value: bytes, flags: int = 0) -> None:
        ops_attr.setxattr(self._ctx, inode, name, value, flags)

    def listxattr(self, inode: InodeId) -> list[bytes]:
        return ops_attr.listxattr(self._ctx, inode)

    def removexattr(self, inode: InodeId, name: bytes) -> None:
        ops_attr.removexattr(self._ctx, inode, name)

    def statfs(self) -> FsStats:
        return ops_read.statfs(self._ctx)

    def object_key(self, inode: InodeId, *, upload: bool = False) -> str:
        return ops_read.object_key(self._ctx, inode)

    def open(self, inode: InodeId, session: str = "", *, write: bool = False) -> Attr:
        """``session``: the mount holding it, when the tree service serves this tree."""
        return ops_attr.open_inode(self._ctx, inode, session)

    def release(self, inode: InodeId, session: str = "") -> None:
        ops_attr.release(self._ctx, inode, session)

    def release_many(self, inodes: list[InodeId], session: str = "") -> None:
        """``release`` of each of ``inodes``, in one transaction (the service's ReleaseMany)."""
        ops_attr.release_many(self._ctx, list(inodes), session)

    def heartbeat(self, session: str) -> int:
        """Open or renew a mount's session (see ``ops_session``); returns its expiry."""
        return ops_session.heartbeat(self._ctx, session)

    def end_session(self, session: str) -> None:
        ops_session.end_session(self._ctx, session)

    def expire_sessions(self) -> int:
        return ops_session.expire_sessions(self._ctx)

    def commit_upload(
        self, inode: InodeId, size: int, mtime_ns: int, etag: str, key: str | None = None
    ) -> Attr:
        return ops_attr.commit_upload(self._ctx, inode, size, mtime_ns, etag, key)

    def commit_pending(self, inode: InodeId, size: int, mtime_ns: int) -> Attr:
        return ops_attr.commit_pending(self._ctx, inode, size, mtime_ns)

    def changes(self) -> Iterator[Invalidation]:
        """What UFS listings changed, as they commit (``ChangeSource``); ends at ``close``.

        Yields ``Invalidation(lost=True)`` once when changes were dropped
        because nobody read them in time. Nothing comes when the Meta was
        built with ``on_listing_change``.
        """
        return self._changes.changes()

    @property
    def loader(self) -> DirectoryLoader:
        """The directory loader (tests wait on its background re-lists)."""
        return self._loader

    def close(self) -> None:
        """Stop the background listings, end ``changes()``, then close the engine."""
        self._loader.close()
        self._changes.close()
        self._ctx.kv.close()
