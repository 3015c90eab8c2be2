"""Tree primitives over one KV transaction: records, dentries, links, freeing.

Everything here is pure tree bookkeeping (no UFS, no locks): the ``ops_*``
modules compose these inside their transactions. Functions that write need a
write transaction; ``now`` is the caller's clock reading in nanoseconds.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import replace

from cloudfs.errors import NotADirectory, NotFound
from cloudfs.meta.engine import codec, inode_numbers
from cloudfs.meta.engine.codec import InodeRecord
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.names import child_key, name_to_str
from cloudfs.types import ROOT_INODE, Attr, InodeId

FIRST_FREE_INODE = inode_numbers.FIRST_FREE_INODE
LAZY_DIR_TIMES_NS = 100_000_000  # TreeSettings.lazy_dir_times


def find(txn: KVTxn, ino: int) -> InodeRecord | None:
    data = txn.get(codec.inode_key(ino))
    return None if data is None else codec.decode_inode(data)


def find_many(txn: KVTxn, inos: list[int]) -> list[InodeRecord | None]:
    """``find`` of each of ``inos``, in one engine round trip where it can."""
    found = txn.get_many([codec.inode_key(ino) for ino in inos])
    return [None if data is None else codec.decode_inode(data) for data in found]


def load(txn: KVTxn, ino: int) -> InodeRecord:
    rec = find(txn, ino)
    if rec is None:
        raise NotFound(f"inode {ino}")
    return rec


Listed = Callable[[InodeRecord], bool] | None  # is this directory's listing fresh? (None: skip)


class DueForListing(Exception):
    """A change found its directory due for a listing from the UFS (``check_listed``):
    the caller lists it and runs the change again, unchecked."""


def check_listed(rec: InodeRecord, listed: Listed) -> None:
    """Raise ``DueForListing`` if ``listed`` says directory ``rec`` must be listed first:
    a change checks it on the record its transaction reads anyway, which saves a
    read of its own before every change."""
    if listed is not None and not listed(rec):
        raise DueForListing()


def load_dir(txn: KVTxn, ino: int) -> InodeRecord:
    rec = load(txn, ino)
    if not stat.S_ISDIR(rec.mode):
        raise NotADirectory(f"inode {ino} is not a directory")
    return rec


def save(txn: KVTxn, ino: int, rec: InodeRecord) -> None:
    txn.put(codec.inode_key(ino), codec.encode_inode(rec))


def to_attr(ino: int, rec: InodeRecord) -> Attr:
    return Attr(
        inode=InodeId(ino),
        mode=rec.mode,
        nlink=rec.nlink,
        uid=rec.uid,
        gid=rec.gid,
        size=rec.size,
        atime_ns=rec.atime_ns,
        mtime_ns=rec.mtime_ns,
        ctime_ns=rec.ctime_ns,
        rdev=rec.rdev,
        etag=rec.etag,
    )


def child(txn: KVTxn, parent: int, name: bytes) -> int | None:
    data = txn.get(codec.dentry_key(parent, name))
    return None if data is None else codec.from_u64(data)


def children(
    txn: KVTxn, parent: int, after: bytes | None = None, limit: int | None = None
) -> list[tuple[bytes, int]]:
    """(name, ino) of a directory's entries in name order, materialized."""
    prefix = codec.dentry_prefix(parent)
    start = None if after is None else prefix + after
    skip = len(prefix)
    return [(k[skip:], codec.from_u64(v)) for k, v in txn.scan(prefix, start, limit)]


def has_children(txn: KVTxn, parent: int) -> bool:
    return any(True for _ in txn.scan(codec.dentry_prefix(parent), None, 1))


def alloc_inodes(txn: KVTxn, count: int) -> int:
    """Reserve ``count`` consecutive inode numbers and count them; returns the first
    (a listing's new names; a single create takes one from ``InodeNumbers``)."""
    first = inode_numbers.reserve(txn, count)
    adjust_inode_count(txn, count)
    return first


def inode_count(txn: KVTxn) -> int:
    """The records the tree holds: the counter plus its shards (``codec``)."""
    total = 0
    for key, value in txn.scan(codec.INODE_COUNT_KEY):
        if key == codec.INODE_COUNT_KEY:
            total += codec.from_u64(value)
        else:
            total += int.from_bytes(value, "big", signed=True)
    return max(0, total)


def adjust_inode_count(txn: KVTxn, delta: int) -> None:
    """Add ``delta`` to the counter itself (a listing's batch of new inodes)."""
    data = txn.get(codec.INODE_COUNT_KEY)
    count = 0 if data is None else codec.from_u64(data)
    txn.put(codec.INODE_COUNT_KEY, codec.u64(max(0, count + delta)))


def count_inode(txn: KVTxn, ino: int, delta: int) -> None:
    """Add ``delta`` (1: made, -1: freed) to the counter shard of ``ino``: concurrent
    changes of other inodes touch other keys."""
    key = codec.count_shard_key(ino)
    data = txn.get(key)
    value = 0 if data is None else int.from_bytes(data, "big", signed=True)
    txn.put(key, (value + delta).to_bytes(8, "big", signed=True))


def open_count(txn: KVTxn, ino: int) -> int:
    data = txn.get(codec.open_key(ino))
    return 0 if data is None else codec.from_u64(data)


def has_object(rec: InodeRecord) -> bool:
    """Whether a regular file's bytes are (believed to be) an object in the UFS."""
    return rec.ufs and stat.S_ISREG(rec.mode)


def is_dir(rec: InodeRecord) -> bool:
    return stat.S_ISDIR(rec.mode)


def is_primary(rec: InodeRecord, parent: int, name: bytes) -> bool:
    return rec.parent == parent and rec.name == name


def key_of(txn: KVTxn, ino: int) -> str:
    """The UFS key of an inode: its primary path, "" for the root."""
    parts: list[str] = []
    current = ino
    for _ in range(4096):  # deeper than PATH_MAX allows; guards a corrupt cycle
        if current == ROOT_INODE:
            return "/".join(reversed(parts))
        rec = load(txn, current)
        if rec.nlink == 0 or rec.parent == 0:
            raise NotFound(f"inode {ino} has no name")
        parts.append(name_to_str(rec.name))
        current = rec.parent
    raise NotFound(f"inode {ino}: path too deep or cyclic")


def entry_key(txn: KVTxn, parent: int, name: bytes) -> str:
    return child_key(key_of(txn, parent), name)


def is_ancestor(txn: KVTxn, ancestor: int, ino: int) -> bool:
    """Whether directory ``ancestor`` is ``ino`` or one of its ancestors."""
    current = ino
    for _ in range(4096):
        if current == ancestor:
            return True
        if current in (ROOT_INODE, 0):
            return False
        current = load(txn, current).parent
    return False


def secondary_links(txn: KVTxn, ino: int) -> list[tuple[int, bytes]]:
    return [codec.split_link_key(k) for k, _ in txn.scan(codec.link_prefix(ino))]


def add_name(txn: KVTxn, parent: int, name: bytes, ino: int) -> None:
    txn.put(codec.dentry_key(parent, name), codec.u64(ino))


def touch(txn: KVTxn, ino: int, now: int, nlink_delta: int = 0) -> None:
    """Set a directory's mtime and ctime (its entries changed), adjusting nlink."""
    rec = load(txn, ino)
    save(txn, ino, replace(rec, mtime_ns=now, ctime_ns=now, nlink=rec.nlink + nlink_delta))
    mark_changed(txn, ino)


def touch_lazily(txn: KVTxn, ino: int, rec: InodeRecord, now: int) -> None:
    """``touch`` for a new entry, unless the directory's mtime is younger than
    ``LAZY_DIR_TIMES_NS`` (as JuiceFS, the mtime only: a utime that set it back is
    followed): then only its change token (a write nobody conflicts on)."""
    if 0 <= now - rec.mtime_ns < LAZY_DIR_TIMES_NS:
        mark_changed(txn, ino)
    else:
        touch(txn, ino, now)


def mark_changed(txn: KVTxn, dir_ino: int) -> None:
    """Tell a listing of ``dir_ino`` in flight that it may be stale (``loader``): a name
    came or went, or an object under it was uploaded. A write without a read, so it
    costs no round trip."""
    txn.put(codec.change_key(dir_ino), os.urandom(8))


def change_token(txn: KVTxn, dir_ino: int) -> bytes | None:
    return txn.get(codec.change_key(dir_ino))


def move_name(
    txn: KVTxn, ino: int, rec: InodeRecord, old: tuple[int, bytes], new: tuple[int, bytes]
) -> InodeRecord:
    """Re-point whichever of the inode's names was ``old`` to ``new`` (record not saved)."""
    if is_primary(rec, *old):
        return replace(rec, parent=new[0], name=new[1])
    txn.delete(codec.link_key(ino, *old))
    txn.put(codec.link_key(ino, *new), b"")
    return rec


def free_inode(txn: KVTxn, ino: int) -> None:
    """Delete an inode and everything hanging off it (xattrs, target, counters)."""
    for key, _ in list(txn.scan(codec.xattr_prefix(ino))):
        txn.delete(key)
    for key, _ in list(txn.scan(codec.link_prefix(ino))):
        txn.delete(key)
    keys = (codec.symlink_key(ino), codec.open_key(ino), codec.orphan_key(ino))
    for key in (*keys, codec.change_key(ino)):
        txn.delete(key)
    txn.delete(codec.inode_key(ino))
    count_inode(txn, ino, -1)


def drop_name(
    txn: KVTxn, parent: int, name: bytes, ino: int, rec: InodeRecord, now: int
) -> InodeRecord:
    """Remove one name of a non-directory; returns the record after.

    Unlinking the primary name promotes a secondary link (the caller has moved
    the UFS object accordingly). At nlink 0 the inode is freed, or kept as an
    orphan while it is open. The parent's times are the caller's business.
    """
    txn.delete(codec.dentry_key(parent, name))
    rec = replace(rec, nlink=max(0, rec.nlink - 1), ctime_ns=now)
    if is_primary(rec, parent, name):
        links = secondary_links(txn, ino) if rec.nlink > 0 else []
        if links:
            new_parent, new_name = links[0]
            txn.delete(codec.link_key(ino, new_parent, new_name))
            rec = replace(rec, parent=new_parent, name=new_name)
        else:
            rec = replace(rec, parent=0, name=b"")
    else:
        txn.delete(codec.link_key(ino, parent, name))
    if rec.nlink > 0:
        save(txn, ino, rec)
    elif open_count(txn, ino) > 0:
        save(txn, ino, rec)
        txn.put(codec.orphan_key(ino), b"")
    else:
        free_inode(txn, ino)
    return rec


def remove_dir_entry(
    txn: KVTxn, parent: int, name: bytes, ino: int, *, adjust_parent: bool = True
) -> None:
    """Remove an empty directory's name and inode (and its ".." link to the parent).

    A directory still open (an opendir handle) is kept as an orphan with nlink 0
    until its last release, so fstat on the handle keeps working.
    """
    txn.delete(codec.dentry_key(parent, name))
    if open_count(txn, ino) > 0:
        save(txn, ino, replace(load(txn, ino), nlink=0, parent=0, name=b""))
        txn.put(codec.orphan_key(ino), b"")
    else:
        free_inode(txn, ino)
    if not adjust_parent:
        return
    rec = load(txn, parent)
    save(txn, parent, replace(rec, nlink=max(2, rec.nlink - 1)))
