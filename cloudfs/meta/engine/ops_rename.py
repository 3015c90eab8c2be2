"""rename(2) with RENAME_NOREPLACE and RENAME_EXCHANGE, UFS first, then the tree.

The read phase checks POSIX rules and plans the UFS moves; the moves run; the
write phase rewires the dentries. Keys derive from primary paths, so moving a
directory's dentry moves its whole subtree's keys with it, matching the
store's ``rename_dir``; a key the store could not hold, the new name's or
one below a moved directory, is refused before any move (``ufs_names``).
What has no UFS presence (files not uploaded yet,
secondary hard-link names, symlinks, fifos) moves in the tree only.

A file whose bytes wait in a write-back journal (``pending``, no object yet)
renamed over an uploaded file takes that object over instead of deleting it:
the upload will overwrite it under the new name, and until then it is the
renamed file's to move or delete, as when a pending file overwrote its own
object (``commit_pending``). So ``write tmp; rename tmp over latest``, the
checkpoint pattern, needs no UFS call and works while the UFS is away.

An exchange of two UFS entries goes through a temporary key next to the
target; if the store fails half-way the tree is unchanged and the UFS may hold
the temporary key until a listing shows it.

No lock as a rule: from plan to commit, a rename reserves both names and both inodes
(``reserve``), so nothing else changes them meanwhile; a rename with nothing
to do in the UFS plans again in its commit, so two directory moves that
would make a cycle together cannot both commit. A rename that moves a
directory present in the UFS changes every key below it: it runs exclusive,
under the namespace lock and the fence.
"""

from __future__ import annotations

import stat
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace

from cloudfs.errors import (
    AlreadyExists,
    InvalidArgument,
    IsADirectory,
    NotADirectory,
    NotFound,
    RemoteIOError,
)
from cloudfs.meta.engine import codec, reserve, tree
from cloudfs.meta.engine.codec import InodeRecord
from cloudfs.meta.engine.context import TreeContext
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.names import validate_name
from cloudfs.meta.engine.store_calls import call_store
from cloudfs.meta.engine.ufs_names import check_key, check_subtree
from cloudfs.meta.interface import RENAME_EXCHANGE, RENAME_NOREPLACE
from cloudfs.ufs.interface import ObjectStore

Step = Callable[[], object]


@dataclass
class _Plan:
    src: int
    dst: int | None
    steps: list[Step] = field(default_factory=list)
    adopt: bool = False  # the source takes over the object it replaces
    moves_dir: bool = False  # a directory present in the UFS moves: every key below it


def _uploads_here(rec: InodeRecord, parent: int, name: bytes) -> bool:
    """Whether a write-back upload will put this file's bytes under this name's key."""
    return stat.S_ISREG(rec.mode) and rec.pending and tree.is_primary(rec, parent, name)


def _presence(rec: InodeRecord, parent: int, name: bytes) -> str | None:
    """What the UFS holds under this name: "dir", "file" or nothing."""
    if tree.is_dir(rec):
        return "dir" if rec.ufs else None
    return "file" if tree.has_object(rec) and tree.is_primary(rec, parent, name) else None


def _move(store: ObjectStore, kind: str, src: str, dst: str) -> Step:
    if kind == "dir":
        return lambda: call_store(store.rename_dir, src, dst)
    return lambda: call_store(store.rename, src, dst)


def _check_replace(
    txn: KVTxn, src_rec: InodeRecord, dst: int, dst_rec: InodeRecord, now: int | None
) -> None:
    if tree.is_dir(src_rec) and not tree.is_dir(dst_rec):
        raise NotADirectory("cannot replace a non-directory with a directory")
    if not tree.is_dir(src_rec) and tree.is_dir(dst_rec):
        raise IsADirectory("cannot replace a directory with a non-directory")
    if tree.is_dir(dst_rec):
        reserve.check_empty(txn, dst, now)


def _exchange_tmp(dst_key: str) -> str:
    """A temporary key beside ``dst_key``, of a fixed 34-byte name: a key near the
    UFS's length limit leaves room for it unless its own name is under 34 bytes."""
    parent = dst_key.rpartition("/")[0]
    name = f".cloudfs-exchange-{uuid.uuid4().hex[:16]}"
    return f"{parent}/{name}" if parent else name


def _check_moved(
    txn: KVTxn, store: ObjectStore, ino: int, rec: InodeRecord, old_key: str, new_key: str
) -> None:
    """The store must hold ``new_key`` and, for a directory, every key below it once moved."""
    check_key(store, "rename", new_key, directory=tree.is_dir(rec))
    if tree.is_dir(rec):
        check_subtree(txn, store, "rename", ino, old_key, new_key)


def _plan(
    txn: KVTxn,
    store: ObjectStore,
    old: tuple[int, bytes],
    new: tuple[int, bytes],
    flags: int,
    now: int | None,
) -> _Plan | None:
    """What the rename does, or None (nothing to do). ``now``: when reservations are
    checked; None in the commit's second plan, which the first plan's reservations
    cover (a change they keep out has not begun, one begun before was waited for)."""
    txn.get_many(  # what is read first, and the reservations, in one round trip
        [
            codec.inode_key(old[0]),
            codec.inode_key(new[0]),
            codec.dentry_key(*old),
            codec.dentry_key(*new),
            codec.reserved_name_key(*old),
            codec.reserved_name_key(*new),
            reserve.FENCE_KEY,
            codec.reserved_inode_key(new[0]),
        ]
    )
    if now is not None:  # no rmdir of the new directory under way
        reserve.check(txn, [codec.reserved_inode_key(new[0])], now)
    tree.load_dir(txn, old[0])
    tree.load_dir(txn, new[0])
    src = tree.child(txn, *old)
    if src is None:
        raise NotFound(f"{old[1]!r}")
    dst = tree.child(txn, *new)
    inos = [src] if dst is None else [src, dst]
    txn.get_many([k for i in inos for k in (codec.inode_key(i), codec.reserved_inode_key(i))])
    if flags & RENAME_EXCHANGE and dst is None:
        raise NotFound(f"{new[1]!r}")
    if flags & RENAME_NOREPLACE and dst is not None and old != new:
        raise AlreadyExists(f"{new[1]!r}")
    if old == new or dst == src:
        return None  # the same name, or two links to one inode: POSIX says do nothing
    src_rec = tree.load(txn, src)
    if tree.is_dir(src_rec) and tree.is_ancestor(txn, src, new[0]):
        raise InvalidArgument("cannot move a directory into itself")
    dst_rec = None if dst is None else tree.load(txn, dst)
    src_key, dst_key = tree.entry_key(txn, *old), tree.entry_key(txn, *new)
    s_kind = _presence(src_rec, *old)
    _check_moved(txn, store, src, src_rec, src_key, dst_key)
    plan = _Plan(src, dst, moves_dir=s_kind == "dir")
    if flags & RENAME_EXCHANGE:
        assert dst is not None and dst_rec is not None
        if tree.is_dir(dst_rec) and tree.is_ancestor(txn, dst, old[0]):
            raise InvalidArgument("cannot move a directory into itself")
        d_kind = _presence(dst_rec, *new)
        _check_moved(txn, store, dst, dst_rec, dst_key, src_key)
        plan.moves_dir = plan.moves_dir or d_kind == "dir"
        if s_kind and d_kind:
            tmp = _exchange_tmp(dst_key)
            check_key(store, "rename", tmp, directory=d_kind == "dir")
            plan.steps += [
                _move(store, d_kind, dst_key, tmp),
                _move(store, s_kind, src_key, dst_key),
                _move(store, d_kind, tmp, src_key),
            ]
        elif s_kind:
            plan.steps.append(_move(store, s_kind, src_key, dst_key))
        elif d_kind:
            plan.steps.append(_move(store, d_kind, dst_key, src_key))
        return plan
    if dst is not None and dst_rec is not None:
        _check_replace(txn, src_rec, dst, dst_rec, now)
        d_kind = _presence(dst_rec, *new)
        if d_kind == "dir":
            plan.steps.append(lambda: call_store(store.remove_dir, dst_key))
        elif d_kind == "file":
            links = tree.secondary_links(txn, dst) if dst_rec.nlink > 1 else []
            if links:  # the replaced file lives on under another name
                plan.steps.append(_move(store, "file", dst_key, tree.entry_key(txn, *links[0])))
            elif s_kind is None and _uploads_here(src_rec, *old):
                plan.adopt = True  # its upload overwrites the object: no UFS call now
            elif s_kind != "file":  # otherwise the source object overwrites it
                plan.steps.append(lambda: call_store(store.delete, dst_key))
    if s_kind is not None:
        plan.steps.append(_move(store, s_kind, src_key, dst_key))
    return plan


def _apply(
    txn: KVTxn,
    plan: _Plan,
    old: tuple[int, bytes],
    new: tuple[int, bytes],
    exchange: bool,
    now: int,
) -> None:
    inos = [plan.src, old[0], new[0]] if plan.dst is None else [plan.src, plan.dst, old[0], new[0]]
    extra = [] if plan.dst is None else [codec.open_key(plan.dst), codec.count_shard_key(plan.dst)]
    txn.get_many([*(codec.inode_key(i) for i in inos), *extra])  # one round trip
    src_rec = tree.load(txn, plan.src)
    subdir_moves = 1 if tree.is_dir(src_rec) else 0
    if exchange:
        assert plan.dst is not None
        dst_rec = tree.load(txn, plan.dst)
        subdir_moves -= 1 if tree.is_dir(dst_rec) else 0
        tree.add_name(txn, *old, plan.dst)
        dst_rec = tree.move_name(txn, plan.dst, dst_rec, new, old)
        tree.save(txn, plan.dst, replace(dst_rec, ctime_ns=now))
    else:
        txn.delete(codec.dentry_key(*old))
        if plan.dst is not None:
            dst_rec = tree.load(txn, plan.dst)
            if tree.is_dir(dst_rec):
                tree.remove_dir_entry(txn, *new, plan.dst)
            else:
                tree.drop_name(txn, *new, plan.dst, dst_rec, now)
    tree.add_name(txn, *new, plan.src)
    src_rec = tree.move_name(txn, plan.src, src_rec, old, new)
    if plan.adopt:
        src_rec = replace(src_rec, ufs=True)
    tree.save(txn, plan.src, replace(src_rec, ctime_ns=now))
    if old[0] == new[0]:
        tree.touch(txn, old[0], now)
    else:
        tree.touch(txn, old[0], now, nlink_delta=-subdir_moves)
        tree.touch(txn, new[0], now, nlink_delta=subdir_moves)


class NeedsFence(Exception):
    """The rename moves a directory present in the UFS: run it exclusive (``reserve``)."""


def rename(
    ctx: TreeContext,
    parent: int,
    name: bytes,
    new_parent: int,
    new_name: bytes,
    flags: int,
    exclusive: AbstractContextManager[object],
) -> tuple[int, int | None]:
    """Rename; returns (moved inode, replaced or exchanged inode) for lock bookkeeping.

    ``exclusive``: the namespace lock, taken (with the fence) only by a rename that
    moves a directory present in the UFS."""
    validate_name(name)
    validate_name(new_name)
    if flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE) or flags == (
        RENAME_NOREPLACE | RENAME_EXCHANGE
    ):
        raise InvalidArgument(f"bad rename flags {flags:#x}")
    try:
        return _rename(ctx, (parent, name), (new_parent, new_name), flags, fence=False)
    except NeedsFence:
        with exclusive:
            return _rename(ctx, (parent, name), (new_parent, new_name), flags, fence=True)


def _rename(
    ctx: TreeContext, old: tuple[int, bytes], new: tuple[int, bytes], flags: int, fence: bool
) -> tuple[int, int | None]:
    exchange = bool(flags & RENAME_EXCHANGE)

    def plan(txn: KVTxn) -> tuple[_Plan | None, list[bytes]]:
        found = _plan(txn, ctx.store, old, new, flags, ctx.clock())
        if found is None:
            return None, []
        if found.moves_dir and not fence:
            raise NeedsFence()
        keys = [codec.reserved_name_key(*old), codec.reserved_name_key(*new)]
        keys.append(codec.reserved_inode_key(found.src))
        if found.dst is not None:
            keys.append(codec.reserved_inode_key(found.dst))
        return found, keys

    def in_store(found: _Plan | None) -> None:
        for step in found.steps if found is not None else []:
            step()

    def apply(txn: KVTxn, found: _Plan | None) -> tuple[int, int | None]:
        if found is None:
            return 0, None
        if not found.steps:  # nothing in the UFS yet: plan again, on what holds now
            found = _plan(txn, ctx.store, old, new, flags, None)
            if found is None:
                return 0, None
            if found.steps:  # the reservations should make this impossible: never skip them
                raise RemoteIOError(f"rename of {old[1]!r}: its UFS state changed meanwhile")
        _apply(txn, found, old, new, exchange, ctx.clock())
        return found.src, found.dst

    return reserve.in_ufs(ctx.kv, ctx.clock, plan, in_store, apply, fence=fence)
