"""Operations that remove a name: unlink and rmdir. The UFS changes first.

Unlinking the last name of an uploaded file deletes its object; unlinking the
primary name of a file that has other hard links moves the object to the key
of the link that becomes primary (``tree.drop_name`` promotes the same one).
If the UFS call fails the tree is untouched and the error propagates. The
caller (``EmbeddedMeta``) holds the namespace lock, so what the read phase
decided still holds in the write phase. Only the write phase is re-run when
its transaction conflicts (etcd, ``write_txn``): never the UFS call.
"""

from __future__ import annotations

from cloudfs.errors import IsADirectory, NotADirectory, NotEmpty, NotFound
from cloudfs.meta.engine import codec, reserve, tree
from cloudfs.meta.engine.codec import InodeRecord
from cloudfs.meta.engine.context import TreeContext
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.kv_retry import write_txn
from cloudfs.meta.engine.names import validate_name
from cloudfs.meta.engine.store_calls import call_store
from cloudfs.types import Attr


def unlink(ctx: TreeContext, parent: int, name: bytes) -> Attr:
    validate_name(name)
    with ctx.kv.transaction(write=False) as txn:
        tree.load_dir(txn, parent)
        ino = tree.child(txn, parent, name)
        if ino is None:
            raise NotFound(f"{name!r}")
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
    if move is not None:
        call_store(ctx.store.rename, *move)
    elif delete is not None:
        call_store(ctx.store.delete, delete)
    now = ctx.clock()

    def drop(txn: KVTxn) -> Attr:
        rec = tree.drop_name(txn, parent, name, ino, tree.load(txn, ino), now)
        tree.touch(txn, parent, now)
        return tree.to_attr(ino, rec)

    return write_txn(ctx.kv, drop)


def rmdir(ctx: TreeContext, parent: int, name: bytes) -> None:
    """The marker first, then the tree; the directory is reserved meanwhile so that no
    create (which takes no lock) puts a name in it (``reserve``)."""
    validate_name(name)

    def plan(txn: KVTxn) -> tuple[int, InodeRecord, str]:
        tree.load_dir(txn, parent)
        ino = tree.child(txn, parent, name)
        if ino is None:
            raise NotFound(f"{name!r}")
        rec = tree.load(txn, ino)
        if not tree.is_dir(rec):
            raise NotADirectory(f"{name!r} is not a directory")
        if tree.has_children(txn, ino):
            raise NotEmpty(f"{name!r} is not empty")
        reserve.hold(txn, [codec.reserved_dir_key(ino)], ctx.clock())
        return ino, rec, tree.entry_key(txn, parent, name)

    ino, rec, key = write_txn(ctx.kv, plan)
    held = [codec.reserved_dir_key(ino)]
    now = ctx.clock()

    def remove(txn: KVTxn) -> None:
        reserve.drop(txn, held)
        tree.remove_dir_entry(txn, parent, name, ino)
        tree.touch(txn, parent, now)

    try:
        if rec.ufs:
            call_store(ctx.store.remove_dir, key)
        write_txn(ctx.kv, remove)
    except BaseException:
        reserve.drop_now(ctx.kv, held)
        raise
