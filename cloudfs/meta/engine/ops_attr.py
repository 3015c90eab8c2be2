"""Tree-only changes to one inode: setattr, xattrs, open counts, committed uploads.

None of these reach the UFS: modes, owners, times and xattrs live only in the
tree, and the data layer has already written the bytes before
``commit_upload``. Each is one write transaction.
"""

from __future__ import annotations

import errno
import logging
import stat
from dataclasses import replace

from cloudfs.errors import (
    AlreadyExists,
    FsError,
    InvalidArgument,
    IsADirectory,
    NoAttribute,
    ObjectChanged,
)
from cloudfs.meta.engine import codec, ops_session, reserve, tree
from cloudfs.meta.engine.context import TreeContext
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.kv_retry import write_txn
from cloudfs.meta.interface import XATTR_CREATE, XATTR_REPLACE
from cloudfs.types import NAME_MAX, Attr, AttrChanges

log = logging.getLogger(__name__)

XATTR_SIZE_MAX = 65536  # linux/limits.h


def setattr(ctx: TreeContext, ino: int, changes: AttrChanges) -> Attr:
    now = ctx.clock()

    def apply(txn: KVTxn) -> Attr:
        rec = tree.load(txn, ino)
        if changes.size is not None and tree.is_dir(rec):
            raise IsADirectory("cannot set the size of a directory")
        if changes.size is not None and changes.size < 0:
            raise InvalidArgument("negative size")
        rec = replace(rec, **changes.applied(rec, now))
        tree.save(txn, ino, rec)
        return tree.to_attr(ino, rec)

    return write_txn(ctx.kv, apply)


def _check_xattr_name(name: bytes) -> None:
    if not name or b"\0" in name:
        raise InvalidArgument("invalid xattr name")
    if len(name) > NAME_MAX:
        raise FsError("xattr name too long", errno=errno.ERANGE)


def getxattr(ctx: TreeContext, ino: int, name: bytes) -> bytes:
    _check_xattr_name(name)
    with ctx.kv.transaction(write=False) as txn:
        # one round trip where the engine is remote: the kernel asks for
        # security.capability before every write()
        txn.get_many([codec.inode_key(ino), codec.xattr_key(ino, name)])
        tree.load(txn, ino)
        value = txn.get(codec.xattr_key(ino, name))
    if value is None:
        raise NoAttribute(f"no xattr {name!r}")
    return value


def setxattr(ctx: TreeContext, ino: int, name: bytes, value: bytes, flags: int) -> None:
    _check_xattr_name(name)
    if len(value) > XATTR_SIZE_MAX:
        raise FsError("xattr value too large", errno=errno.E2BIG)
    if flags & ~(XATTR_CREATE | XATTR_REPLACE):
        raise InvalidArgument(f"bad setxattr flags {flags:#x}")
    now = ctx.clock()

    def apply(txn: KVTxn) -> None:
        rec = tree.load(txn, ino)
        present = txn.get(codec.xattr_key(ino, name)) is not None
        if flags & XATTR_CREATE and present:
            raise AlreadyExists(f"xattr {name!r} exists")
        if flags & XATTR_REPLACE and not present:
            raise NoAttribute(f"no xattr {name!r}")
        txn.put(codec.xattr_key(ino, name), value)
        tree.save(txn, ino, replace(rec, ctime_ns=now))

    write_txn(ctx.kv, apply)


def listxattr(ctx: TreeContext, ino: int) -> list[bytes]:
    prefix = codec.xattr_prefix(ino)
    with ctx.kv.transaction(write=False) as txn:
        tree.load(txn, ino)
        return [key[len(prefix) :] for key, _ in txn.scan(prefix)]


def removexattr(ctx: TreeContext, ino: int, name: bytes) -> None:
    _check_xattr_name(name)
    now = ctx.clock()

    def apply(txn: KVTxn) -> None:
        rec = tree.load(txn, ino)
        if txn.get(codec.xattr_key(ino, name)) is None:
            raise NoAttribute(f"no xattr {name!r}")
        txn.delete(codec.xattr_key(ino, name))
        tree.save(txn, ino, replace(rec, ctime_ns=now))

    write_txn(ctx.kv, apply)


def open_inode(ctx: TreeContext, ino: int, session: str = "") -> Attr:
    """One more open of ``ino``, held by ``session`` ("" in the embedded tree)."""

    def apply(txn: KVTxn) -> Attr:
        txn.get_many(open_keys(ino, session))
        rec = tree.load(txn, ino)
        hold(txn, ino, session, ctx.clock())
        return tree.to_attr(ino, rec)

    return write_txn(ctx.kv, apply)


def hold(txn: KVTxn, ino: int, session: str, now: int) -> None:
    """Count one more open of ``ino`` by ``session`` (in the caller's transaction)."""
    txn.put(codec.open_key(ino), codec.u64(tree.open_count(txn, ino) + 1))
    if session:
        ops_session.held(txn, session, ino, +1, now)


def open_keys(ino: int, session: str) -> list[bytes]:
    """What open and release read: fetched in one round trip where the engine is remote."""
    return [codec.inode_key(ino), codec.open_key(ino), *ops_session.hold_keys(session, ino)]


def release(ctx: TreeContext, ino: int, session: str = "") -> None:
    release_many(ctx, [ino], session)


def release_many(ctx: TreeContext, inos: list[int], session: str = "") -> None:
    """Give back one open of each of ``inos`` (an inode may come more than once), in one
    transaction: an unlinked inode whose last open this was is freed."""

    def apply(txn: KVTxn) -> None:
        txn.get_many([key for ino in dict.fromkeys(inos) for key in open_keys(ino, session)])
        now = ctx.clock()
        for ino in inos:
            _release_in(txn, ino, session, now)

    write_txn(ctx.kv, apply)


def _release_in(txn: KVTxn, ino: int, session: str, now: int) -> None:
    count = tree.open_count(txn, ino)
    if count == 0:
        log.warning("release of inode %d that is not open", ino)
        return
    if session:
        ops_session.held(txn, session, ino, -1, now)
    if count > 1:
        txn.put(codec.open_key(ino), codec.u64(count - 1))
        return
    txn.delete(codec.open_key(ino))
    rec = tree.find(txn, ino)
    if rec is not None and rec.nlink == 0:
        tree.free_inode(txn, ino)


def commit_upload(
    ctx: TreeContext, ino: int, size: int, mtime_ns: int, etag: str, key: str | None = None
) -> Attr:
    """``key``: where the bytes were put. A rename between the uploader's last look at
    the key and this commit would otherwise record an object under a name that has
    none (the bytes still under the old key): refused with ESTALE instead."""
    now = ctx.clock()

    def apply(txn: KVTxn) -> Attr:
        _check_unreserved(ctx, txn, ino)
        rec = tree.load(txn, ino)
        if not stat.S_ISREG(rec.mode):
            raise IsADirectory if tree.is_dir(rec) else InvalidArgument("not a regular file")
        if key is not None and tree.key_of(txn, ino) != key:
            raise ObjectChanged(f"inode {ino} was renamed while its upload to {key!r} ran")
        rec = replace(
            rec, size=size, mtime_ns=mtime_ns, ctime_ns=now, etag=etag, ufs=True, pending=False
        )
        tree.save(txn, ino, rec)
        if rec.parent:  # its object is under the primary name: a listing there must know
            tree.mark_changed(txn, rec.parent)
        return tree.to_attr(ino, rec)

    return reserve.wait_out(lambda: write_txn(ctx.kv, apply), ctx.clock)


def _check_unreserved(ctx: TreeContext, txn: KVTxn, ino: int) -> None:
    """A commit waits while a rename or unlink of the file, or a directory rename (the
    fence), is under way: what it records depends on the file's name and key."""
    txn.get_many([codec.reserved_inode_key(ino), reserve.FENCE_KEY, codec.inode_key(ino)])
    reserve.check(txn, [codec.reserved_inode_key(ino)], ctx.clock(), fence=True)


def commit_pending(ctx: TreeContext, ino: int, size: int, mtime_ns: int) -> Attr:
    """New bytes are durable in the write-back journal: record their size, keep the object.

    ``ufs`` is kept: an object from before still sits under the file's name, and
    a rename or unlink must move or delete it until the upload replaces it.
    """
    now = ctx.clock()

    def apply(txn: KVTxn) -> Attr:
        _check_unreserved(ctx, txn, ino)
        rec = tree.load(txn, ino)
        if not stat.S_ISREG(rec.mode):
            raise IsADirectory if tree.is_dir(rec) else InvalidArgument("not a regular file")
        rec = replace(rec, size=size, mtime_ns=mtime_ns, ctime_ns=now, etag="", pending=True)
        tree.save(txn, ino, rec)
        if rec.parent:
            tree.mark_changed(txn, rec.parent)
        return tree.to_attr(ino, rec)

    return reserve.wait_out(lambda: write_txn(ctx.kv, apply), ctx.clock)
