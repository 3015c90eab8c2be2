"""The pyfuse3 ``Operations`` of a CloudFS mount: forward to the VFS, map errors.

This is the only place that turns ``FsError`` into ``FUSEError``; anything
else that escapes the VFS is a bug, logged with its traceback and answered
with EIO, never a hang and never a silent success.

Dataset mode (``dataset_mode``, read-only mounts with the patched pyfuse3 of
``deploy/pyfuse3/``): ``open`` and ``flush`` answer ENOSYS, which the kernel
takes as libfuse's no_open and no_flush. From the first such answer on it
sends no OPEN, FLUSH or RELEASE for any file, keeps the page cache across
opens, and passes the inode where ``read`` expects a handle. Directory
listings are kept in the page cache as well (``cache_readdir``, which the
patched ``opendir`` reads). A warm file or listing is then served by the
kernel alone; what changes is dropped from it explicitly (``Invalidator``).

Read-write mounts (same build) open read-only handles with ``noflush``: the
kernel then sends no FLUSH at their close, which had nothing to upload.

Every request costs a counter, a latency observation and, on error, an error
counter; their label children are bound once per operation name, not looked
up per request.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyfuse3
from pyfuse3 import FUSEError

from cloudfs.errors import FsError
from cloudfs.fuse.convert import attr_changes, entry_attributes, statvfs
from cloudfs.metrics import Metrics
from cloudfs.types import Attr, InodeId
from cloudfs.vfs.core import Caller, Vfs

log = logging.getLogger(__name__)

T = TypeVar("T")


def _caller(ctx: pyfuse3.RequestContext) -> Caller:
    return Caller(uid=ctx.uid, gid=ctx.gid, pid=ctx.pid, umask=ctx.umask)


@dataclass(frozen=True, slots=True)
class _OpMetrics:
    """The metric children of one operation name."""

    calls: Any
    latency: Any
    errors: Any  # the unbound error counter: its errno label varies


class _BoundMetrics(dict[str, _OpMetrics]):
    def __init__(self, metrics: Metrics) -> None:
        super().__init__()
        self._metrics = metrics

    def __missing__(self, op: str) -> _OpMetrics:
        bound = _OpMetrics(
            self._metrics.fuse_ops.labels(op),
            self._metrics.fuse_latency.labels(op),
            self._metrics.fuse_errors,
        )
        self[op] = bound
        return bound


class CloudFsOperations(pyfuse3.Operations):
    supports_dot_lookup = False
    enable_writeback_cache = False
    enable_acl = False

    def __init__(
        self,
        vfs: Vfs,
        metrics: Metrics,
        *,
        timeout: float,
        block_size: int,
        negative_timeout: float = 0.0,
        dataset_mode: bool = False,
        cache_listings: bool = False,
        noflush_reads: bool = False,
    ) -> None:
        """``timeout``: how long the kernel keeps names and attributes;
        ``negative_timeout``: how long it remembers that a name does not exist (0: not at
        all; a tree-service mount, whose server pushes new names, sets it);
        ``dataset_mode``: let the kernel skip open, flush and release (module doc);
        ``cache_listings``: let it keep directory listings until told they changed;
        ``noflush_reads``: tell it to send no FLUSH for read-only opens (module doc)."""
        super().__init__()
        self._vfs = vfs
        self._bound = _BoundMetrics(metrics)
        self._read_bytes = metrics.fuse_bytes.labels("read")
        self._write_bytes = metrics.fuse_bytes.labels("write")
        self._timeout = timeout
        self._block_size = block_size
        self._negative_timeout = negative_timeout
        self._dataset_mode = dataset_mode
        self.cache_readdir = cache_listings  # read by the patched pyfuse3 at each opendir
        self._noflush_reads = noflush_reads

    async def _run(self, op: str, work: Awaitable[T]) -> T:
        start = time.perf_counter()
        bound = self._bound[op]
        bound.calls.inc()
        try:
            return await work
        except FsError as e:
            bound.errors.labels(op, errno.errorcode.get(e.errno, str(e.errno))).inc()
            if e.errno == errno.EIO:
                log.warning("%s: %s", op, e)
            raise FUSEError(e.errno) from e
        except FUSEError:
            raise
        except Exception:
            bound.errors.labels(op, "EIO").inc()
            log.exception("%s failed unexpectedly", op)
            raise FUSEError(errno.EIO) from None
        finally:
            bound.latency.observe(time.perf_counter() - start)

    def _skipped(self, op: str) -> FUSEError:
        """ENOSYS for an operation dataset mode hands to the kernel (counted once each)."""
        self._bound[op].calls.inc()
        return FUSEError(errno.ENOSYS)

    def _entry(self, attr: Attr) -> pyfuse3.EntryAttributes:
        return entry_attributes(attr, self._timeout, self._block_size)

    async def _entry_of(self, op: str, work: Awaitable[Attr]) -> pyfuse3.EntryAttributes:
        return self._entry(await self._run(op, work))

    # -- attributes ------------------------------------------------------------

    async def lookup(
        self, parent_inode: pyfuse3.InodeT, name: pyfuse3.FileNameT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        try:
            return await self._entry_of("lookup", self._vfs.lookup(InodeId(parent_inode), name))
        except FUSEError as e:
            if e.errno != errno.ENOENT or not self._negative_timeout:
                raise
        missing = pyfuse3.EntryAttributes()  # inode 0: the kernel caches "no such name"
        missing.st_ino = pyfuse3.InodeT(0)
        missing.entry_timeout = self._negative_timeout
        return missing

    async def forget(self, inode_list: Sequence[tuple[pyfuse3.InodeT, int]]) -> None:
        # Inodes live in the tree, not in this process: nothing to drop.
        return None

    async def getattr(
        self, inode: pyfuse3.InodeT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        return await self._entry_of("getattr", self._vfs.getattr(InodeId(inode)))

    async def setattr(
        self,
        inode: pyfuse3.InodeT,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: pyfuse3.FileHandleT | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        changes = attr_changes(attr, fields)
        return await self._entry_of("setattr", self._vfs.setattr(InodeId(inode), changes))

    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        return statvfs(await self._run("statfs", self._vfs.statfs()))

    # -- directories -----------------------------------------------------------

    async def opendir(
        self, inode: pyfuse3.InodeT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileHandleT:
        fh = await self._run("opendir", self._vfs.opendir(InodeId(inode)))
        return pyfuse3.FileHandleT(fh)

    async def readdir(
        self, fh: pyfuse3.FileHandleT, start_id: int, token: pyfuse3.ReaddirToken
    ) -> None:
        entries, first = await self._run("readdir", self._vfs.readdir(fh, start_id))
        for offset, entry in enumerate(entries, start=first + 1):
            name = pyfuse3.FileNameT(entry.name)
            if not pyfuse3.readdir_reply(token, name, self._entry(entry.attr), offset):
                break

    async def releasedir(self, fh: pyfuse3.FileHandleT) -> None:
        await self._run("releasedir", self._vfs.releasedir(fh))

    async def fsyncdir(self, fh: pyfuse3.FileHandleT, datasync: bool) -> None:
        return None  # every tree change is already committed

    async def mkdir(
        self,
        parent_inode: pyfuse3.InodeT,
        name: pyfuse3.FileNameT,
        mode: int,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        work = self._vfs.mkdir(InodeId(parent_inode), name, mode, _caller(ctx))
        return await self._entry_of("mkdir", work)

    async def rmdir(
        self, parent_inode: pyfuse3.InodeT, name: pyfuse3.FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        await self._run("rmdir", self._vfs.rmdir(InodeId(parent_inode), name))

    # -- names -------------------------------------------------------------------

    async def mknod(
        self,
        parent_inode: pyfuse3.InodeT,
        name: pyfuse3.FileNameT,
        mode: int,
        rdev: int,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        work = self._vfs.mknod(InodeId(parent_inode), name, mode, rdev, _caller(ctx))
        return await self._entry_of("mknod", work)

    async def create(
        self,
        parent_inode: pyfuse3.InodeT,
        name: pyfuse3.FileNameT,
        mode: int,
        flags: int,
        ctx: pyfuse3.RequestContext,
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        work = self._vfs.create(InodeId(parent_inode), name, mode, flags, _caller(ctx))
        fh, attr = await self._run("create", work)
        return pyfuse3.FileInfo(fh=pyfuse3.FileHandleT(fh)), self._entry(attr)

    async def symlink(
        self,
        parent_inode: pyfuse3.InodeT,
        name: pyfuse3.FileNameT,
        target: pyfuse3.FileNameT,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        work = self._vfs.symlink(InodeId(parent_inode), name, target, _caller(ctx))
        return await self._entry_of("symlink", work)

    async def readlink(
        self, inode: pyfuse3.InodeT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileNameT:
        return pyfuse3.FileNameT(await self._run("readlink", self._vfs.readlink(InodeId(inode))))

    async def link(
        self,
        inode: pyfuse3.InodeT,
        new_parent_inode: pyfuse3.InodeT,
        new_name: pyfuse3.FileNameT,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        work = self._vfs.link(InodeId(inode), InodeId(new_parent_inode), new_name)
        return await self._entry_of("link", work)

    async def unlink(
        self, parent_inode: pyfuse3.InodeT, name: pyfuse3.FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        await self._run("unlink", self._vfs.unlink(InodeId(parent_inode), name))

    async def rename(
        self,
        parent_inode_old: pyfuse3.InodeT,
        name_old: pyfuse3.FileNameT,
        parent_inode_new: pyfuse3.InodeT,
        name_new: pyfuse3.FileNameT,
        flags: pyfuse3.FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        work = self._vfs.rename(
            InodeId(parent_inode_old), name_old, InodeId(parent_inode_new), name_new, flags
        )
        await self._run("rename", work)

    # -- file contents -------------------------------------------------------------

    async def open(
        self, inode: pyfuse3.InodeT, flags: pyfuse3.FlagT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileInfo:
        if self._dataset_mode:
            raise self._skipped("open")  # no_open: the kernel stops asking
        fh, keep_cache = await self._run("open", self._vfs.open(InodeId(inode), flags))
        info = pyfuse3.FileInfo(fh=pyfuse3.FileHandleT(fh), keep_cache=keep_cache)
        if self._noflush_reads and flags & (os.O_ACCMODE | os.O_TRUNC) == os.O_RDONLY:
            info.noflush = True  # its close has nothing to upload: no FLUSH request
        return info

    async def read(self, fh: pyfuse3.FileHandleT, off: int, size: int) -> bytes | memoryview:  # type: ignore[override]
        if self._dataset_mode:  # no open was answered: ``fh`` is the inode
            data = await self._run("read", self._vfs.read_inode(InodeId(fh), off, size))
        else:
            data = await self._run("read", self._vfs.read(fh, off, size))
        self._read_bytes.inc(len(data))
        return data

    async def write(self, fh: pyfuse3.FileHandleT, off: int, buf: bytes) -> int:
        written = await self._run("write", self._vfs.write(fh, off, buf))
        self._write_bytes.inc(written)
        return written

    async def flush(self, fh: pyfuse3.FileHandleT) -> None:
        if self._dataset_mode:
            raise self._skipped("flush")  # no_flush: nothing is ever written here
        await self._run("flush", self._vfs.flush(fh))

    async def fsync(self, fh: pyfuse3.FileHandleT, datasync: bool) -> None:
        await self._run("fsync", self._vfs.fsync(fh))

    async def release(self, fh: pyfuse3.FileHandleT) -> None:
        await self._run("release", self._vfs.release(fh))

    # -- extended attributes ---------------------------------------------------------

    async def getxattr(
        self, inode: pyfuse3.InodeT, name: pyfuse3.XAttrNameT, ctx: pyfuse3.RequestContext
    ) -> bytes:
        return await self._run("getxattr", self._vfs.getxattr(InodeId(inode), name))

    async def setxattr(
        self,
        inode: pyfuse3.InodeT,
        name: pyfuse3.XAttrNameT,
        value: bytes,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        # pyfuse3 enforces setxattr(2)'s XATTR_CREATE/XATTR_REPLACE itself (with a
        # getxattr first) and does not pass the flags on.
        await self._run("setxattr", self._vfs.setxattr(InodeId(inode), name, value, 0))

    async def listxattr(
        self, inode: pyfuse3.InodeT, ctx: pyfuse3.RequestContext
    ) -> Sequence[pyfuse3.XAttrNameT]:
        names = await self._run("listxattr", self._vfs.listxattr(InodeId(inode)))
        return [pyfuse3.XAttrNameT(n) for n in names]

    async def removexattr(
        self, inode: pyfuse3.InodeT, name: pyfuse3.XAttrNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        await self._run("removexattr", self._vfs.removexattr(InodeId(inode), name))
