"""Opening a tree: create the root on first use, clean up after the last process.

Open counts only mean something to the process that holds the handles. When
the tree is opened they are all stale (the previous mount exited or crashed),
so they are cleared and every orphan (an unlinked inode that was still open)
is freed. This assumes one process serves a tree at a time, which holds for
the embedded LMDB engine (a shared engine will need per-session counts).
"""

from __future__ import annotations

from cloudfs.meta.engine import codec, tree
from cloudfs.meta.engine.context import TreeContext
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.kv_retry import write_txn
from cloudfs.meta.engine.ufs_sync import new_record
from cloudfs.types import ROOT_INODE


def init_volume(ctx: TreeContext, *, shared: bool = False) -> None:
    """Create the root if new. Unless ``shared`` (served to many mounts, whose
    sessions outlive a server restart and expire on their own), forget every
    open count and free the orphans: the one process that held them is gone."""
    now = ctx.clock()
    s = ctx.settings

    def apply(txn: KVTxn) -> None:
        if tree.find(txn, ROOT_INODE) is None:
            # the root is the UFS root: a directory as a listing would reveal it
            root = new_record(None, 0, b"", now, s)
            tree.save(txn, ROOT_INODE, root)
            txn.put(codec.NEXT_INODE_KEY, codec.u64(tree.FIRST_FREE_INODE))
            txn.put(codec.INODE_COUNT_KEY, codec.u64(1))
        if shared:
            return
        for key, _ in list(txn.scan(codec.OPEN_PREFIX)):
            txn.delete(key)
        for key, _ in list(txn.scan(codec.ORPHAN_PREFIX)):
            ino = codec.from_u64(key[1:])
            rec = tree.find(txn, ino)
            if rec is not None and rec.nlink == 0:
                tree.free_inode(txn, ino)
            txn.delete(key)

    write_txn(ctx.kv, apply)
