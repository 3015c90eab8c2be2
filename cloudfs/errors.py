"""Errno-carrying exceptions shared by every layer.

Every layer raises a subclass of :class:`FsError`; only the FUSE adapter turns
them into ``pyfuse3.FUSEError`` (see ``cloudfs/fuse/operations.py``). The CLI turns
:class:`UsageError` and :class:`FsError` into a one-line message and an exit code.
"""

from __future__ import annotations

import errno as _errno


class FsError(Exception):
    """A filesystem failure with the errno the caller should see."""

    errno: int = _errno.EIO

    def __init__(self, message: str = "", *, errno: int | None = None) -> None:
        super().__init__(message or _errno.errorcode.get(errno or self.errno, "EIO"))
        if errno is not None:
            self.errno = errno


class NotFound(FsError):
    errno = _errno.ENOENT


class AlreadyExists(FsError):
    errno = _errno.EEXIST


class NotEmpty(FsError):
    errno = _errno.ENOTEMPTY


class NotADirectory(FsError):
    errno = _errno.ENOTDIR


class IsADirectory(FsError):
    errno = _errno.EISDIR


class NameTooLong(FsError):
    errno = _errno.ENAMETOOLONG


class CrossDevice(FsError):
    errno = _errno.EXDEV


class ReadOnly(FsError):
    errno = _errno.EROFS


class AccessDenied(FsError):
    errno = _errno.EACCES


class NotPermitted(FsError):
    errno = _errno.EPERM


class InvalidArgument(FsError):
    errno = _errno.EINVAL


class IllegalName(FsError):
    """A name the UFS cannot store (S3 keys must be valid UTF-8, at most 1024 bytes)."""

    errno = _errno.EILSEQ


class NoAttribute(FsError):
    errno = _errno.ENODATA


class NoSpace(FsError):
    errno = _errno.ENOSPC


class NotSupported(FsError):
    errno = _errno.EOPNOTSUPP


class BadFileHandle(FsError):
    errno = _errno.EBADF


class RemoteIOError(FsError):
    """The UFS (or a remote service) failed after bounded retries."""

    errno = _errno.EIO


class TreeUnreachable(RemoteIOError):
    """The tree service could not be reached (not back within the reconnect wait): a
    mount then runs detached, answering reads from what it knows (``meta/client/detached.py``)."""


class ObjectChanged(FsError):
    """The object is no longer the version (ETag, size) the caller named: its view is stale."""

    errno = _errno.ESTALE


class TxnConflict(FsError):
    """An optimistic KV transaction lost a race (the etcd engine): run it again.

    Raised when a write transaction commits (or, rarely, when a snapshot read
    finds its revision compacted). ``cloudfs.meta.engine.kv_retry`` re-runs the
    transaction's body; a caller that sees this error has run out of tries.
    """

    errno = _errno.EAGAIN


class UfsAccessDenied(FsError):
    """The UFS refused our credentials (S3 403, HDFS permission denied)."""

    errno = _errno.EACCES


class UsageError(Exception):
    """A user mistake on the command line: printed as one line, exit status 2."""


class StartupError(Exception):
    """The mount could not start (bucket missing, mountpoint busy, no /dev/fuse): exit 1."""
