"""Key layout and record encoding of the tree in the KV engine.

Keys (integers are 8-byte big-endian so that byte order is numeric order):

=====================================  ======================================
``I`` ino                              inode record (``InodeRecord``)
``D`` parent name                      dentry -> child ino (8 bytes)
``L`` ino parent name                  secondary hard-link name of ino -> b""
``X`` ino name                         xattr value
``S`` ino                              symlink target
``O`` ino                              open count (8 bytes)
``P`` ino                              orphan: nlink 0 but still open -> b""
``V`` ino                              directory's change token (8 random bytes)
``C:next_inode`` / ``C:inode_count``   counters (8 bytes)
``C:inode_count/`` shard               more of the inode counter (``tree.count_shard``)
``R`` ino / ``R`` parent name          reservation of an inode / a name while a
                                       namespace change calls the UFS (``reserve``)
``F``                                  the fence of a directory rename (``reserve``)
=====================================  ======================================

The inode count is the sum of ``C:inode_count`` and its shards: a change adds
to the shard of the inode it makes or frees, so concurrent changes of
different inodes (over etcd) do not conflict on one counter key.

The primary name (parent, name) of an inode lives in its record: it is the
path, hence the UFS key, of the inode. Other names of a hard-linked inode are
``L`` entries so that unlinking the primary name can promote one of them.

Records start with a version byte so the layout can evolve; an unknown
version is reported as corruption rather than misread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cloudfs.errors import FsError

RECORD_VERSION = 1

# version, mode, nlink, uid, gid, rdev, size, atime, mtime, ctime, parent,
# loaded_at, flags, len(etag), len(name)
_INODE = struct.Struct(">BIIIIQQqqqQqBHH")
_FLAG_UFS = 1
_FLAG_PENDING = 2

NEXT_INODE_KEY = b"C:next_inode"
INODE_COUNT_KEY = b"C:inode_count"
INODE_COUNT_SHARDS = 256
NS_LOCK_KEY = b"C:ns_lock"  # shared engines: the tree's cross-server namespace lock
ORIGIN_KEY = b"C:origin"  # shared engines: the session that made the last change
OPEN_PREFIX = b"O"
ORPHAN_PREFIX = b"P"


@dataclass(frozen=True, slots=True)
class InodeRecord:
    """Everything the tree stores about one inode (``dataclasses.replace`` to change)."""

    mode: int
    nlink: int
    uid: int
    gid: int
    size: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    rdev: int = 0
    etag: str = ""
    parent: int = 0  # primary parent inode; 0 for the root and for orphans
    name: bytes = b""  # primary name in ``parent``
    loaded_at_ns: int = 0  # directories: when last merged from a UFS listing
    ufs: bool = False  # backed by the UFS (an object or a directory there)
    # Files: newer bytes wait in this mount's write-back journal (size and mtime
    # are theirs; etag is ""); a UFS listing has no say until they are uploaded.
    pending: bool = False


def encode_inode(rec: InodeRecord) -> bytes:
    etag = rec.etag.encode("utf-8")
    header = _INODE.pack(
        RECORD_VERSION,
        rec.mode,
        rec.nlink,
        rec.uid,
        rec.gid,
        rec.rdev,
        rec.size,
        rec.atime_ns,
        rec.mtime_ns,
        rec.ctime_ns,
        rec.parent,
        rec.loaded_at_ns,
        (_FLAG_UFS if rec.ufs else 0) | (_FLAG_PENDING if rec.pending else 0),
        len(etag),
        len(rec.name),
    )
    return header + etag + rec.name


def decode_inode(data: bytes) -> InodeRecord:
    if not data or data[0] != RECORD_VERSION:
        raise FsError(f"corrupt inode record (version {data[:1]!r})")
    (
        _,
        mode,
        nlink,
        uid,
        gid,
        rdev,
        size,
        atime,
        mtime,
        ctime,
        parent,
        loaded,
        flags,
        etag_len,
        name_len,
    ) = _INODE.unpack_from(data)
    offset = _INODE.size
    etag = data[offset : offset + etag_len].decode("utf-8")
    name = data[offset + etag_len : offset + etag_len + name_len]
    return InodeRecord(
        mode=mode,
        nlink=nlink,
        uid=uid,
        gid=gid,
        size=size,
        atime_ns=atime,
        mtime_ns=mtime,
        ctime_ns=ctime,
        rdev=rdev,
        etag=etag,
        parent=parent,
        name=bytes(name),
        loaded_at_ns=loaded,
        ufs=bool(flags & _FLAG_UFS),
        pending=bool(flags & _FLAG_PENDING),
    )


def u64(value: int) -> bytes:
    return value.to_bytes(8, "big")


def from_u64(data: bytes) -> int:
    return int.from_bytes(data[:8], "big")


def inode_key(ino: int) -> bytes:
    return b"I" + u64(ino)


def dentry_prefix(parent: int) -> bytes:
    return b"D" + u64(parent)


def dentry_key(parent: int, name: bytes) -> bytes:
    return b"D" + u64(parent) + name


def link_prefix(ino: int) -> bytes:
    return b"L" + u64(ino)


def link_key(ino: int, parent: int, name: bytes) -> bytes:
    return b"L" + u64(ino) + u64(parent) + name


def split_link_key(key: bytes) -> tuple[int, bytes]:
    """(parent, name) of an ``L`` key."""
    return from_u64(key[9:17]), key[17:]


def xattr_prefix(ino: int) -> bytes:
    return b"X" + u64(ino)


def xattr_key(ino: int, name: bytes) -> bytes:
    return b"X" + u64(ino) + name


def symlink_key(ino: int) -> bytes:
    return b"S" + u64(ino)


def open_key(ino: int) -> bytes:
    return OPEN_PREFIX + u64(ino)


def orphan_key(ino: int) -> bytes:
    return ORPHAN_PREFIX + u64(ino)


def change_key(ino: int) -> bytes:
    """Rewritten by every change a UFS listing of directory ``ino`` could miss (``loader``)."""
    return b"V" + u64(ino)


def count_shard_key(ino: int) -> bytes:
    """The inode-counter shard a change of inode ``ino`` adds to."""
    return INODE_COUNT_KEY + b"/" + u64(ino % INODE_COUNT_SHARDS)


def reserved_inode_key(ino: int) -> bytes:
    """Held while inode ``ino``'s UFS presence changes, or it is removed (``reserve``)."""
    return b"R" + u64(ino)


def reserved_name_key(parent: int, name: bytes) -> bytes:
    """Held while ``name`` in ``parent`` is being made, removed or renamed (``reserve``)."""
    return b"R" + u64(parent) + name
