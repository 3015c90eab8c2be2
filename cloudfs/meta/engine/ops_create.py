"""Operations that add a name: create (files, fifos, sockets, devices), mkdir, symlink, link.

Only ``mkdir`` reaches the UFS (a directory marker), before the tree changes;
every new name's key must be one the UFS can hold (``ufs_names``), checked in
the transaction that adds it (and before the marker). New files stay tree-only
(etag "") until the data layer uploads them and calls ``commit_upload``.

create, mknod, symlink and link are one transaction each and take no lock:
they wait only for a reservation (``reserve``) of their name, directory or
inode; mkdir reserves its name while it makes the marker. New
inode numbers come from this process's batch (``InodeNumbers``), and a new
inode counts in its own counter shard, so concurrent creates in different
directories share no key. Write transactions go through ``write_txn`` (re-run
on a conflict, etcd).
"""

from __future__ import annotations

import errno
import stat
from dataclasses import replace
from typing import NamedTuple

from cloudfs.errors import (
    AlreadyExists,
    FsError,
    InvalidArgument,
    NameTooLong,
    NotFound,
    NotPermitted,
)
from cloudfs.meta.engine import codec, inode_numbers, ops_attr, reserve, tree
from cloudfs.meta.engine.codec import InodeRecord
from cloudfs.meta.engine.context import TreeContext
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.kv_retry import write_txn
from cloudfs.meta.engine.names import validate_name
from cloudfs.meta.engine.store_calls import call_store
from cloudfs.meta.engine.ufs_names import check_key
from cloudfs.types import Attr

SYMLINK_MAX = 4096  # PATH_MAX


class Added(NamedTuple):
    """What a change that adds a name made."""

    attr: Attr  # the new inode's
    key: str  # its UFS key
    parent: Attr  # its directory's, once the name was in


def _check_free(
    txn: KVTxn, parent: int, name: bytes, listed: tree.Listed = None
) -> InodeRecord:
    """The directory ``parent``'s record, if ``name`` is free in it (and it is listed)."""
    parent_rec = tree.load_dir(txn, parent)
    tree.check_listed(parent_rec, listed)
    if tree.child(txn, parent, name) is not None:
        raise AlreadyExists(f"{name!r} exists")
    return parent_rec


def _inherit(parent_rec: InodeRecord, rec: InodeRecord) -> InodeRecord:
    """The set-group-ID directory rule: a new entry takes the directory's group, and a
    new directory its set-group-ID bit too (applied here, in the transaction that reads
    the directory, so a chmod of it cannot slip in between)."""
    if not parent_rec.mode & stat.S_ISGID:
        return rec
    mode = rec.mode | stat.S_ISGID if stat.S_ISDIR(rec.mode) else rec.mode
    return replace(rec, gid=parent_rec.gid, mode=mode)


def _insert(
    txn: KVTxn,
    ctx: TreeContext,
    op: str,
    parent: int,
    name: bytes,
    rec: InodeRecord,
    now: int,
    ino: int,
    also: tuple[bytes, ...] = (),
    listed: tree.Listed = None,
) -> Added:
    """Add ``name`` in ``parent`` for the new inode ``ino`` with record ``rec``
    (``AlreadyExists`` if taken, the store's error if it cannot hold the key).
    ``also``: keys the caller reads next, fetched with these."""
    keys = [codec.reserved_name_key(parent, name), codec.reserved_inode_key(parent)]
    txn.get_many(  # every key read below, in one round trip where the engine is remote
        [
            codec.inode_key(parent),
            codec.dentry_key(parent, name),
            codec.count_shard_key(ino),
            *keys,
            *also,
        ]
    )
    parent_rec = _check_free(txn, parent, name, listed)
    if op != "mkdir":  # mkdir reserved the name itself
        reserve.check(txn, keys, ctx.clock())
    key = tree.entry_key(txn, parent, name)
    check_key(ctx.store, op, key, directory=tree.is_dir(rec))
    rec = replace(_inherit(parent_rec, rec), parent=parent, name=name)
    tree.save(txn, ino, rec)
    tree.count_inode(txn, ino, 1)
    tree.add_name(txn, parent, name, ino)
    if tree.is_dir(rec) or not ctx.settings.lazy_dir_times:
        tree.touch(txn, parent, now, nlink_delta=1 if tree.is_dir(rec) else 0)
    else:
        tree.touch_lazily(txn, parent, parent_rec, now)
    return Added(tree.to_attr(ino, rec), key, tree.to_attr(parent, tree.load(txn, parent)))


def _new(
    mode: int, uid: int, gid: int, now: int, *, nlink: int = 1, size: int = 0, rdev: int = 0
) -> InodeRecord:
    """A new inode's record, every time ``now``."""
    return InodeRecord(
        mode=mode,
        nlink=nlink,
        uid=uid,
        gid=gid,
        size=size,
        atime_ns=now,
        mtime_ns=now,
        ctime_ns=now,
        rdev=rdev,
    )


def _add(
    ctx: TreeContext,
    op: str,
    parent: int,
    name: bytes,
    rec: InodeRecord,
    *,
    target: bytes = b"",
    held_by: str | None = None,
    wait: bool = True,
    listed: tree.Listed = None,
    reserved: int = 0,
) -> Added:
    """A new non-directory, in one transaction and no lock: it waits only while its
    name or directory is reserved by a change in the UFS (``reserve``); without
    ``wait``, ``reserve.Reserved`` is raised instead. ``held_by``: the session that
    holds it open from the start ("" in an embedded tree). ``listed``: raise
    ``tree.DueForListing`` if it says the directory is due for a listing.
    ``reserved``: its inode number, reserved earlier (``create_at``); 0: a new one."""
    ino = reserved or ctx.numbers.take(ctx.kv)
    also = () if held_by is None else tuple(ops_attr.open_keys(ino, held_by))

    def insert(txn: KVTxn) -> Added:
        if reserved:
            inode_numbers.check_reserved(txn, reserved)
        added = _insert(txn, ctx, op, parent, name, rec, rec.ctime_ns, ino, also, listed)
        if target:
            txn.put(codec.symlink_key(ino), target)
        if held_by is not None:
            ops_attr.hold(txn, ino, held_by, ctx.clock())
        return added

    if not wait:
        return write_txn(ctx.kv, insert)
    return reserve.wait_out(lambda: write_txn(ctx.kv, insert), ctx.clock)


def create(
    ctx: TreeContext,
    parent: int,
    name: bytes,
    mode: int,
    uid: int,
    gid: int,
    rdev: int,
    listed: tree.Listed = None,
) -> Attr:
    return _create(ctx, parent, name, mode, uid, gid, rdev, listed=listed).attr


def create_now(
    ctx: TreeContext, parent: int, name: bytes, mode: int, uid: int, gid: int, listed: tree.Listed
) -> Attr | None:
    """A regular file, made at once, or None if its name or directory is reserved or the
    directory is due for a listing (``create`` then waits, or lists)."""
    rec = _new(stat.S_IFREG | (mode & 0o7777), uid, gid, ctx.clock())
    try:
        return _add(ctx, "create", parent, name, rec, wait=False, listed=listed).attr
    except (reserve.Reserved, tree.DueForListing):
        return None


def create_open(
    ctx: TreeContext,
    parent: int,
    name: bytes,
    mode: int,
    uid: int,
    gid: int,
    session: str,
    listed: tree.Listed = None,
) -> Added:
    """A regular file held open by ``session`` from the start: a new file's create,
    open and object key in one transaction."""
    mode = stat.S_IFREG | (mode & 0o7777)
    return _create(ctx, parent, name, mode, uid, gid, 0, session, listed)


def _create(
    ctx: TreeContext,
    parent: int,
    name: bytes,
    mode: int,
    uid: int,
    gid: int,
    rdev: int,
    held_by: str | None = None,
    listed: tree.Listed = None,
) -> Added:
    validate_name(name)
    kind = stat.S_IFMT(mode) or stat.S_IFREG
    if kind in (stat.S_IFDIR, stat.S_IFLNK):
        raise InvalidArgument("create cannot make directories or symlinks")
    rdev = rdev if kind in (stat.S_IFCHR, stat.S_IFBLK) else 0
    rec = _new(kind | (mode & 0o7777), uid, gid, ctx.clock(), rdev=rdev)
    op = "create" if kind == stat.S_IFREG else "mknod"
    return _add(ctx, op, parent, name, rec, held_by=held_by, listed=listed)


def create_at(
    ctx: TreeContext,
    parent: int,
    name: bytes,
    mode: int,
    uid: int,
    gid: int,
    reserved: int,
    listed: tree.Listed = None,
) -> Attr:
    """A regular file or a directory (by ``mode``) under the inode number ``reserved``,
    which a ``ReserveInodes`` gave and no inode has (``AlreadyExists`` if one has): a
    create a mount journaled while the tree service was away, replayed."""
    validate_name(name)
    if stat.S_ISDIR(mode):
        return mkdir(ctx, parent, name, mode, uid, gid, listed, reserved=reserved)
    rec = _new(stat.S_IFREG | (mode & 0o7777), uid, gid, ctx.clock())
    return _add(ctx, "create", parent, name, rec, listed=listed, reserved=reserved).attr


def mkdir(
    ctx: TreeContext,
    parent: int,
    name: bytes,
    mode: int,
    uid: int,
    gid: int,
    listed: tree.Listed = None,
    *,
    reserved: int = 0,
) -> Attr:
    """The marker first, then the tree; the name is reserved meanwhile (``reserve``).
    ``reserved``: its inode number, reserved earlier (``create_at``)."""
    validate_name(name)

    def plan(txn: KVTxn) -> tuple[str, list[bytes]]:
        _check_free(txn, parent, name, listed)
        reserve.check(txn, [codec.reserved_inode_key(parent)], ctx.clock())  # no rmdir of it
        return tree.entry_key(txn, parent, name), [codec.reserved_name_key(parent, name)]

    numbers: list[int] = []

    def in_store(key: str) -> None:
        check_key(ctx.store, "mkdir", key, directory=True)
        call_store(ctx.store.make_dir, key)
        numbers.append(reserved or ctx.numbers.take(ctx.kv))

    def insert(txn: KVTxn, key: str) -> Attr:
        if reserved:
            inode_numbers.check_reserved(txn, reserved)
        now = ctx.clock()
        # A directory we just made is empty in the UFS too: it counts as listed.
        rec = _new(stat.S_IFDIR | (mode & 0o7777), uid, gid, now, nlink=2)
        rec = replace(rec, loaded_at_ns=now, ufs=True)
        return _insert(txn, ctx, "mkdir", parent, name, rec, now, numbers[0]).attr

    return reserve.in_ufs(ctx.kv, ctx.clock, plan, in_store, insert)


def symlink(
    ctx: TreeContext,
    parent: int,
    name: bytes,
    target: bytes,
    uid: int,
    gid: int,
    listed: tree.Listed = None,
) -> Attr:
    validate_name(name)
    if not target:
        raise NotFound("empty symlink target")
    if b"\0" in target:
        raise InvalidArgument("NUL in symlink target")
    if len(target) >= SYMLINK_MAX:
        raise NameTooLong("symlink target too long")
    rec = _new(stat.S_IFLNK | 0o777, uid, gid, ctx.clock(), size=len(target))
    return _add(ctx, "symlink", parent, name, rec, target=target, listed=listed).attr


def link(
    ctx: TreeContext, ino: int, new_parent: int, new_name: bytes, listed: tree.Listed = None
) -> Attr:
    validate_name(new_name)
    now = ctx.clock()

    def add_link(txn: KVTxn) -> Attr:
        reserve.check(  # the file's object, the new name and its directory: none changing
            txn,
            [
                codec.reserved_inode_key(ino),
                codec.reserved_name_key(new_parent, new_name),
                codec.reserved_inode_key(new_parent),
            ],
            ctx.clock(),
        )
        rec = tree.load(txn, ino)
        if tree.is_dir(rec):
            raise NotPermitted("hard link to a directory")
        if rec.nlink == 0:
            raise NotFound(f"inode {ino} was unlinked")
        if rec.nlink >= 0xFFFFFFFF:
            raise FsError("too many links", errno=errno.EMLINK)
        _check_free(txn, new_parent, new_name, listed)
        # The object moves to this name's key if the first name goes.
        check_key(ctx.store, "link", tree.entry_key(txn, new_parent, new_name))
        tree.add_name(txn, new_parent, new_name, ino)
        txn.put(codec.link_key(ino, new_parent, new_name), b"")
        rec = replace(rec, nlink=rec.nlink + 1, ctime_ns=now)
        tree.save(txn, ino, rec)
        tree.touch(txn, new_parent, now)
        return tree.to_attr(ino, rec)

    return reserve.wait_out(lambda: write_txn(ctx.kv, add_link), ctx.clock)
