"""Read-only tree operations; the caller has made the directory fresh first (or, for
``lookup``, passes the freshness check)."""

from __future__ import annotations

import stat
from collections.abc import Callable

from cloudfs.errors import InvalidArgument, NotFound
from cloudfs.meta.engine import codec, tree
from cloudfs.meta.engine.codec import InodeRecord
from cloudfs.meta.engine.context import TreeContext
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.store_calls import call_store
from cloudfs.types import Attr, DirEntry, FsStats

BLOCK_SIZE = 4096
INODE_LIMIT = 1 << 32  # what statfs advertises: the tree has no real inode limit


def lookup(ctx: TreeContext, parent: int, name: bytes) -> Attr:
    with ctx.kv.transaction(write=False) as txn:
        txn.get_many([codec.inode_key(parent), codec.dentry_key(parent, name)])
        tree.load_dir(txn, parent)
        return _child_attr(txn, parent, name)


def lookup_if_fresh(
    ctx: TreeContext, parent: int, name: bytes, fresh: Callable[[InodeRecord], bool]
) -> Attr | None:
    """``lookup``, or ``None`` when ``fresh`` finds the parent's listing stale (checked
    in the same read: one round trip less than checking first)."""
    with ctx.kv.transaction(write=False) as txn:
        txn.get_many([codec.inode_key(parent), codec.dentry_key(parent, name)])
        if not fresh(tree.load_dir(txn, parent)):
            return None
        return _child_attr(txn, parent, name)


def _child_attr(txn: KVTxn, parent: int, name: bytes) -> Attr:
    ino = tree.child(txn, parent, name)
    if ino is None:
        raise NotFound(f"{name!r}")
    return tree.to_attr(ino, tree.load(txn, ino))


def getattr(ctx: TreeContext, ino: int) -> Attr:
    with ctx.kv.transaction(write=False) as txn:
        return tree.to_attr(ino, tree.load(txn, ino))


def readdir(ctx: TreeContext, ino: int, after: bytes | None, limit: int) -> list[DirEntry]:
    if limit <= 0:
        return []
    with ctx.kv.transaction(write=False) as txn:
        tree.load_dir(txn, ino)
        names = list(tree.children(txn, ino, after, limit))
        records = tree.find_many(txn, [child for _, child in names])
        return [
            DirEntry(name, tree.to_attr(child, rec))
            for (name, child), rec in zip(names, records, strict=True)
            if rec is not None
        ]


def readlink(ctx: TreeContext, ino: int) -> bytes:
    with ctx.kv.transaction(write=False) as txn:
        rec = tree.load(txn, ino)
        target = txn.get(codec.symlink_key(ino))
    if not stat.S_ISLNK(rec.mode) or target is None:
        raise InvalidArgument(f"inode {ino} is not a symlink")
    return target


def object_key(ctx: TreeContext, ino: int) -> str:
    with ctx.kv.transaction(write=False) as txn:
        return tree.key_of(txn, ino)


def statfs(ctx: TreeContext) -> FsStats:
    total, free = call_store(ctx.store.statfs)
    with ctx.kv.transaction(write=False) as txn:
        used = tree.inode_count(txn)
    total_inodes = max(INODE_LIMIT, used)
    return FsStats(
        block_size=BLOCK_SIZE,
        total_blocks=total // BLOCK_SIZE,
        free_blocks=free // BLOCK_SIZE,
        total_inodes=total_inodes,
        free_inodes=total_inodes - used,
    )
