"""Operations that remove a name: unlink and rmdir. The UFS changes first.

Unlinking the last name of an uploaded file deletes its object; unlinking the
primary name of a file that has other hard links moves the object to the key
of the link that becomes primary (``tree.drop_name`` promotes the same one).
If the UFS call fails the tree is untouched and the error propagates. No
lock: the plan reserves the name and the inode (``reserve.in_ufs``), so what
it decided still holds when the change commits. Only the transactions are
re-run when they conflict (etcd, ``write_txn``): never the UFS call.
"""

from __future__ import annotations

from cloudfs.errors import IsADirectory, NotADirectory, NotFound
from cloudfs.meta.engine import codec, reserve, tree
from cloudfs.meta.engine.codec import InodeRecord
from cloudfs.meta.engine.context import TreeContext
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.names import validate_name
from cloudfs.meta.engine.store_calls import call_store
from cloudfs.types import Attr


def unlink(ctx: TreeContext, parent: int, name: bytes, listed: tree.Listed = None) -> Attr:
    """``listed``: checks that ``parent`` is listed, on the record the plan reads
    (``tree.check_listed``; ``DueForListing`` if not)."""
    validate_name(name)

    def plan(txn: KVTxn) -> tuple[tuple[int, tuple[str, str] | None, str | None], list[bytes]]:
        txn.get_many(  # what is read first, and the reservations, in one round trip
            [
                codec.inode_key(parent),
                codec.dentry_key(parent, name),
                codec.reserved_name_key(parent, name),
                reserve.FENCE_KEY,
            ]
        )
        tree.check_listed(tree.load_dir(txn, parent), listed)
        ino = tree.child(txn, parent, name)
        if ino is None:
            raise NotFound(f"{name!r}")
        txn.get_many([codec.inode_key(ino), codec.reserved_inode_key(ino)])
        rec = tree.load(txn, ino)
        if tree.is_dir(rec):
            raise IsADirectory(f"{name!r} is a directory")
        move: tuple[str, str] | None = None
        delete: str | None = None
        if tree.has_object(rec) and tree.is_primary(rec, parent, name):
            key = tree.entry_key(txn, parent, name)
            links = tree.secondary_links(txn, ino) if rec.nlink > 1 else []
            if links:
                move = (key, tree.entry_key(txn, *links[0]))
            else:
                delete = key
        keys = [codec.reserved_name_key(parent, name), codec.reserved_inode_key(ino)]
        return (ino, move, delete), keys

    def in_store(planned: tuple[int, tuple[str, str] | None, str | None]) -> None:
        _, move, delete = planned
        if move is not None:
            call_store(ctx.store.rename, *move)
        elif delete is not None:
            call_store(ctx.store.delete, delete)

    def drop(txn: KVTxn, planned: tuple[int, tuple[str, str] | None, str | None]) -> Attr:
        ino, now = planned[0], ctx.clock()
        txn.get_many(  # what drop_name and touch read, in one round trip
            [
                codec.inode_key(ino),
                codec.inode_key(parent),
                codec.open_key(ino),
                codec.count_shard_key(ino),
            ]
        )
        rec = tree.drop_name(txn, parent, name, ino, tree.load(txn, ino), now)
        tree.touch(txn, parent, now)
        return tree.to_attr(ino, rec)

    return reserve.in_ufs(ctx.kv, ctx.clock, plan, in_store, drop)


def rmdir(ctx: TreeContext, parent: int, name: bytes) -> None:
    """The marker first, then the tree; the name and the directory are reserved
    meanwhile, so that no create (nor anything else) puts a name in it."""
    validate_name(name)

    def plan(txn: KVTxn) -> tuple[tuple[int, InodeRecord, str], list[bytes]]:
        tree.load_dir(txn, parent)
        ino = tree.child(txn, parent, name)
        if ino is None:
            raise NotFound(f"{name!r}")
        rec = tree.load(txn, ino)
        if not tree.is_dir(rec):
            raise NotADirectory(f"{name!r} is not a directory")
        reserve.check_empty(txn, ino, ctx.clock())
        keys = [codec.reserved_name_key(parent, name), codec.reserved_inode_key(ino)]
        return (ino, rec, tree.entry_key(txn, parent, name)), keys

    def in_store(planned: tuple[int, InodeRecord, str]) -> None:
        _, rec, key = planned
        if rec.ufs:
            call_store(ctx.store.remove_dir, key)

    def remove(txn: KVTxn, planned: tuple[int, InodeRecord, str]) -> None:
        tree.remove_dir_entry(txn, parent, name, planned[0])
        tree.touch(txn, parent, ctx.clock())

    reserve.in_ufs(ctx.kv, ctx.clock, plan, in_store, remove)
