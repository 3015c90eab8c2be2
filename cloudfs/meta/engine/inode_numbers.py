"""Inode numbers handed out from batches this process reserved, not one counter per create.

Every create used to read and write the tree's one ``C:next_inode`` key in its
own transaction, so over etcd any two concurrent creates, whatever their
directories, conflicted on it and one ran again. Now a tree server (or an
embedded mount) reserves ``BATCH`` numbers at a time in a small transaction of
its own and hands them out under a thread lock; a create's transaction never
touches the counter. Numbers a process reserved but did not use (it stopped,
or a create failed) are skipped for good: inode numbers are 64-bit and only
have to be unique and above every record's (``testkit/tree_check``).
"""

from __future__ import annotations

import threading

from cloudfs.errors import AlreadyExists, InvalidArgument
from cloudfs.meta.engine import codec
from cloudfs.meta.engine.kv import KVEngine, KVTxn
from cloudfs.meta.engine.kv_retry import write_txn

BATCH = 64
FIRST_FREE_INODE = 2  # the root is 1


def reserve(txn: KVTxn, count: int) -> int:
    """Move the tree's next-inode counter past ``count`` numbers; returns the first."""
    data = txn.get(codec.NEXT_INODE_KEY)
    first = FIRST_FREE_INODE if data is None else codec.from_u64(data)
    txn.put(codec.NEXT_INODE_KEY, codec.u64(first + count))
    return first


def check_reserved(txn: KVTxn, number: int) -> None:
    """Refuse ``number`` for a new inode unless a ``reserve`` handed it out and no inode
    has it (``CreateAt``: a number a mount reserved earlier)."""
    data = txn.get(codec.NEXT_INODE_KEY)
    end = FIRST_FREE_INODE if data is None else codec.from_u64(data)
    if not FIRST_FREE_INODE <= number < end:
        raise InvalidArgument(f"inode {number} was never reserved")
    if txn.get(codec.inode_key(number)) is not None:
        raise AlreadyExists(f"inode {number} exists")


class InodeNumbers:
    """This process's supply of fresh inode numbers for one tree."""

    def __init__(self, batch: int = BATCH) -> None:
        self._batch = batch
        self._lock = threading.Lock()
        self._next = 0
        self._end = 0  # numbers in [_next, _end) are ours

    def take(self, kv: KVEngine) -> int:
        """A number no other inode of the tree has or will get. Must not be called
        inside a transaction (it may open one)."""
        with self._lock:
            if self._next >= self._end:
                self._next = write_txn(kv, lambda txn: reserve(txn, self._batch))
                self._end = self._next + self._batch
            number = self._next
            self._next += 1
            return number
