"""Between the Meta protocol's values and errors and their protobuf/gRPC forms.

Errors travel as a gRPC status code plus the exact errno in the trailing
metadata key ``cloudfs-errno``; the client rebuilds the same ``FsError``
subclass from the errno (``from_errno``), so the kernel gets the errno the
tree produced.
"""

from __future__ import annotations

import errno as E

import grpc

from cloudfs import errors
from cloudfs.meta.interface import Invalidation
from cloudfs.types import Attr, AttrChanges, DirEntry, FsStats, InodeId
from cloudfs.v1 import meta_pb2 as pb

_STATUS = {
    E.ENOENT: grpc.StatusCode.NOT_FOUND,
    E.EEXIST: grpc.StatusCode.ALREADY_EXISTS,
    E.EINVAL: grpc.StatusCode.INVALID_ARGUMENT,
    E.ENAMETOOLONG: grpc.StatusCode.INVALID_ARGUMENT,
    E.EILSEQ: grpc.StatusCode.INVALID_ARGUMENT,
    E.ENOTDIR: grpc.StatusCode.FAILED_PRECONDITION,
    E.EISDIR: grpc.StatusCode.FAILED_PRECONDITION,
    E.ENOTEMPTY: grpc.StatusCode.FAILED_PRECONDITION,
    E.ENODATA: grpc.StatusCode.NOT_FOUND,
    E.EPERM: grpc.StatusCode.PERMISSION_DENIED,
    E.EACCES: grpc.StatusCode.PERMISSION_DENIED,
    E.EROFS: grpc.StatusCode.FAILED_PRECONDITION,
    E.ENOSPC: grpc.StatusCode.RESOURCE_EXHAUSTED,
    E.EXDEV: grpc.StatusCode.FAILED_PRECONDITION,
    E.EOPNOTSUPP: grpc.StatusCode.UNIMPLEMENTED,
    E.ERANGE: grpc.StatusCode.OUT_OF_RANGE,  # an xattr name or value past its limit
    E.E2BIG: grpc.StatusCode.OUT_OF_RANGE,
    E.EFBIG: grpc.StatusCode.OUT_OF_RANGE,
    E.EOVERFLOW: grpc.StatusCode.OUT_OF_RANGE,
    E.EMLINK: grpc.StatusCode.FAILED_PRECONDITION,
    E.ELOOP: grpc.StatusCode.FAILED_PRECONDITION,
    E.EBUSY: grpc.StatusCode.FAILED_PRECONDITION,
    E.EBADF: grpc.StatusCode.FAILED_PRECONDITION,
    E.ESTALE: grpc.StatusCode.FAILED_PRECONDITION,
    E.EAGAIN: grpc.StatusCode.ABORTED,
    E.ETIMEDOUT: grpc.StatusCode.DEADLINE_EXCEEDED,
    # Not UNAVAILABLE: clients retry that status as "never reached the server", and
    # a call that failed with EIO inside the server (etcd or the UFS away) may
    # already have changed the tree; sent again it would be applied twice.
    E.EIO: grpc.StatusCode.INTERNAL,
}

_CLASSES: dict[int, type[errors.FsError]] = {}
for _cls in vars(errors).values():  # the first class per errno: AccessDenied before UfsAccessDenied
    if isinstance(_cls, type) and issubclass(_cls, errors.FsError) and _cls is not errors.FsError:
        _CLASSES.setdefault(_cls.errno, _cls)


def printable(message: str) -> str:
    """A status message gRPC can carry: names that are not UTF-8 shown as escapes."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def status_of(errno: int) -> grpc.StatusCode:
    """The status of an ``FsError``; an errno without a closer one is FAILED_PRECONDITION
    (the tree refused it), never UNKNOWN: the exact errno travels beside it anyway."""
    return _STATUS.get(errno, grpc.StatusCode.FAILED_PRECONDITION)


def from_errno(errno: int, message: str) -> errors.FsError:
    """The ``FsError`` subclass that carries ``errno`` (plain ``FsError`` otherwise)."""
    cls = _CLASSES.get(errno)
    if cls is None:
        return errors.FsError(message, errno=errno)
    return cls(message)


def attr_to_pb(a: Attr) -> pb.Attr:
    return pb.Attr(
        inode=a.inode, mode=a.mode, nlink=a.nlink, uid=a.uid, gid=a.gid, size=a.size,
        atime_ns=a.atime_ns, mtime_ns=a.mtime_ns, ctime_ns=a.ctime_ns, rdev=a.rdev, etag=a.etag,
    )  # fmt: skip


def attr_from_pb(m: pb.Attr) -> Attr:
    return Attr(
        inode=InodeId(m.inode), mode=m.mode, nlink=m.nlink, uid=m.uid, gid=m.gid, size=m.size,
        atime_ns=m.atime_ns, mtime_ns=m.mtime_ns, ctime_ns=m.ctime_ns, rdev=m.rdev, etag=m.etag,
    )  # fmt: skip


_CHANGE_FIELDS = ("mode", "uid", "gid", "size", "atime_ns", "mtime_ns", "ctime_ns", "etag")


def changes_to_pb(c: AttrChanges) -> pb.AttrChanges:
    return pb.AttrChanges(**{f: getattr(c, f) for f in _CHANGE_FIELDS if getattr(c, f) is not None})


def changes_from_pb(m: pb.AttrChanges) -> AttrChanges:
    return AttrChanges(**{f: getattr(m, f) if m.HasField(f) else None for f in _CHANGE_FIELDS})


def entries_to_pb(entries: list[DirEntry]) -> pb.ReadDirReply:
    return pb.ReadDirReply(
        entries=[pb.DirEntry(name=e.name, attr=attr_to_pb(e.attr)) for e in entries]
    )


def entries_from_pb(m: pb.ReadDirReply) -> list[DirEntry]:
    return [DirEntry(e.name, attr_from_pb(e.attr)) for e in m.entries]


def stats_to_pb(s: FsStats) -> pb.FsStats:
    return pb.FsStats(
        block_size=s.block_size, total_blocks=s.total_blocks, free_blocks=s.free_blocks,
        total_inodes=s.total_inodes, free_inodes=s.free_inodes, name_max=s.name_max,
    )  # fmt: skip


def stats_from_pb(m: pb.FsStats) -> FsStats:
    return FsStats(
        block_size=m.block_size, total_blocks=m.total_blocks, free_blocks=m.free_blocks,
        total_inodes=m.total_inodes, free_inodes=m.free_inodes, name_max=m.name_max,
    )  # fmt: skip


def invalidation_to_pb(change: Invalidation) -> pb.Invalidation:
    return pb.Invalidation(
        inodes=sorted(change.inodes),
        entries=[pb.EntryRef(parent=p, name=n) for p, n in sorted(change.entries)],
        lost=change.lost,
    )


def invalidation_from_pb(m: pb.Invalidation) -> Invalidation:
    return Invalidation(
        tuple(InodeId(i) for i in m.inodes),
        tuple((InodeId(e.parent), e.name) for e in m.entries),
        m.lost,
    )
