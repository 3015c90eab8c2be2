"""The Meta protocol: the namespace and POSIX attributes of one volume.

The VFS talks to the tree only through this protocol, so the embedded
implementation (``cloudfs.meta.embedded.EmbeddedMeta``: tree operations over an
LMDB KV engine in the mount process) and the tree service's gRPC client
(``cloudfs.meta.client.grpc_meta.GrpcMeta``) are interchangeable. Every method is
blocking and thread-safe; the VFS calls them through ``trio.to_thread.run_sync``.

The tree mirrors the UFS: a directory backed by the UFS is listed on first use
(``lookup``/``readdir`` of its entries) and again once ``meta_ttl`` has passed;
attributes come from the listing (no HEAD per file). Attributes the UFS cannot
hold (mode, owner, times set by the user, xattrs, symlinks, hard links, fifos,
sockets) live only in the tree. Namespace changes (mkdir, unlink, rmdir,
rename) are applied to the UFS by the implementation; file *contents* are
uploaded by the data layer, which then calls ``commit_upload``.

Permission checks are the kernel's (``default_permissions``); the protocol
checks only what the tree itself knows (existence, types, emptiness, names).

Errors (``cloudfs.errors``): ``NotFound`` (ENOENT), ``AlreadyExists`` (EEXIST),
``NotADirectory`` (ENOTDIR), ``IsADirectory`` (EISDIR), ``NotEmpty`` (ENOTEMPTY),
``NameTooLong`` (ENAMETOOLONG, name over 255 bytes), ``InvalidArgument`` (EINVAL:
a name with "/" or NUL, "." or "..", renaming a directory into itself),
``NoAttribute`` (ENODATA), ``NotPermitted`` (EPERM: link to a directory),
``RemoteIOError`` (EIO: the UFS failed after retries).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from cloudfs.types import Attr, AttrChanges, DirEntry, FsStats, InodeId

# rename() flags, the values of linux/fs.h (and of pyfuse3.RENAME_*).
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2

# setxattr() flags, the values of linux/xattr.h.
XATTR_CREATE = 1
XATTR_REPLACE = 2


@dataclass(frozen=True, slots=True)
class Invalidation:
    """What another mount changed: the kernel's cached attributes and names to drop."""

    inodes: tuple[InodeId, ...] = ()
    entries: tuple[tuple[InodeId, bytes], ...] = ()  # (parent, name)
    lost: bool = False  # changes were dropped before this one (the feed fell behind)


class ChangeSource(Protocol):
    """A shared tree that tells a mount what other mounts change (``GrpcMeta``)."""

    def changes(self) -> Iterator[Invalidation]:
        """Block for the next changes, as they commit; ends (or raises) when closed."""
        ...


class Meta(Protocol):
    # True when getattr, object_key, readlink, getxattr and listxattr are answered
    # in-process without I/O that can block (MVCC reads of the embedded tree): the
    # VFS then calls them inline rather than through a worker thread. A network
    # client says False.
    local_reads: bool

    def lookup(self, parent: InodeId, name: bytes) -> Attr:
        """The attributes of ``name`` in directory ``parent``; lists it from the UFS if stale."""
        ...

    def lookup_if_listed(self, parent: InodeId, name: bytes) -> Attr | None:
        """``lookup`` when ``parent`` needs no listing first; None when it does.

        Never contacts the UFS, so a local tree can answer it inline (the
        common case: a data loader opening files of a directory it listed).
        """
        ...

    def getattr(self, inode: InodeId) -> Attr: ...

    def setattr(self, inode: InodeId, changes: AttrChanges) -> Attr:
        """Apply ``changes`` (ctime is set to now unless given). Returns the new attributes.

        A size change only records the new size: the data layer owns the bytes.
        """
        ...

    def readdir(self, inode: InodeId, after: bytes | None, limit: int) -> list[DirEntry]:
        """Up to ``limit`` entries of a directory in name order, starting after ``after``.

        Without "." and "..". Lists the directory from the UFS first when stale.
        """
        ...

    def create(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int, rdev: int = 0
    ) -> Attr:
        """Create a regular file, fifo, socket or device node (type taken from ``mode``).

        ``AlreadyExists`` if the name exists. A regular file starts with
        ``etag == ""``: it is in the tree only until the data layer uploads it.
        Fifos, sockets and devices never reach the UFS.
        """
        ...

    def create_if_ready(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int
    ) -> Attr | None:
        """``create`` of a regular file when nothing need be waited for: ``parent``
        needs no listing and no change in the UFS holds the name; None when one must
        (then call ``create``). Never contacts the UFS and never sleeps, so a local
        tree can answer it inline; a network client always answers None."""
        ...

    def create_open(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int
    ) -> tuple[Attr, str]:
        """``create`` of a regular file (permission bits from ``mode``) that is also
        ``open`` once by the caller, and its ``object_key``: a new file's three calls
        in one. The caller ``release``s it like any open."""
        ...

    def mkdir(self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int) -> Attr:
        """Create a directory, in the tree and in the UFS (an S3 "name/" marker)."""
        ...

    def symlink(self, parent: InodeId, name: bytes, target: bytes, uid: int, gid: int) -> Attr: ...

    def readlink(self, inode: InodeId) -> bytes: ...

    def link(self, inode: InodeId, new_parent: InodeId, new_name: bytes) -> Attr:
        """A hard link (tree only; the UFS keeps one object under one of the names)."""
        ...

    def unlink(self, parent: InodeId, name: bytes) -> Attr:
        """Remove a non-directory name. Returns the inode's attributes after (nlink may be 0).

        The last name of an uploaded file deletes its object. An inode with
        nlink 0 that is still open (see ``open``) keeps its attributes until
        the last ``release``.
        """
        ...

    def rmdir(self, parent: InodeId, name: bytes) -> None: ...

    def rename(
        self, parent: InodeId, name: bytes, new_parent: InodeId, new_name: bytes, flags: int = 0
    ) -> None:
        """POSIX rename, plus ``RENAME_NOREPLACE`` and ``RENAME_EXCHANGE``; moves UFS objects."""
        ...

    def getxattr(self, inode: InodeId, name: bytes) -> bytes: ...

    def setxattr(self, inode: InodeId, name: bytes, value: bytes, flags: int = 0) -> None: ...

    def listxattr(self, inode: InodeId) -> list[bytes]: ...

    def removexattr(self, inode: InodeId, name: bytes) -> None: ...

    def statfs(self) -> FsStats: ...

    def refresh(self, inode: InodeId) -> Invalidation:
        """List directory ``inode`` from the UFS now, whatever the TTL says.

        Returns what it changed: the inodes and names a kernel must drop (a
        shared tree also tells its other mounts). ``NotADirectory``,
        ``NotFound``; ``RemoteIOError`` if the UFS cannot be listed (the old
        listing stays).
        """
        ...

    def object_key(self, inode: InodeId, *, upload: bool = False) -> str:
        """The UFS key that holds (or will hold) a regular file's bytes: its path.

        ``NotFound`` for an inode with no name left (unlinked). ``upload``: bytes are
        about to be put there; a mount whose tree does not know the name yet (a create
        journaled while the tree service was away) refuses with ``TreeUnreachable``.
        """
        ...

    def open(self, inode: InodeId, *, write: bool = False) -> Attr:
        """Count one more open handle on ``inode`` (it survives unlink until released).

        ``write``: the handle may write (a tree that cannot take changes now refuses it
        here rather than at close, whose error writers often ignore)."""
        ...

    def release(self, inode: InodeId) -> None:
        """Drop one open handle; frees an unlinked inode at the last one."""
        ...

    def commit_upload(
        self, inode: InodeId, size: int, mtime_ns: int, etag: str, key: str | None = None
    ) -> Attr:
        """Record that the file's bytes are now in the UFS as an object with ``etag``.

        ``key``: where they were put; if the file's key is no longer that (renamed
        while the upload ran), ``ObjectChanged`` (ESTALE) and nothing is recorded:
        the caller moves the object to the new key and commits again.
        """
        ...

    def commit_pending(self, inode: InodeId, size: int, mtime_ns: int) -> Attr:
        """Record new bytes waiting in the write-back journal (etag "" until uploaded).

        Until ``commit_upload``, a listing of the UFS leaves the file alone.
        """
        ...

    def close(self) -> None:
        """Release the engine (LMDB environment, connections)."""
        ...
