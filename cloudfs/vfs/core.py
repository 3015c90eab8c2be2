"""The POSIX core: every filesystem operation, over the Meta protocol and the data layer.

The FUSE adapter forwards each kernel request here and maps the ``FsError`` it
may raise to an errno; nothing here knows about pyfuse3. Tree calls are
blocking and go through a worker thread (``_meta``) with a limiter. Permissions
are the kernel's (the mount uses ``default_permissions``, so no ACCESS request
ever arrives).
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

import trio

from cloudfs.data.reader import ObjectReader
from cloudfs.errors import (
    InvalidArgument,
    IsADirectory,
    NoAttribute,
    NotADirectory,
    NotFound,
    ReadOnly,
)
from cloudfs.meta.interface import RENAME_EXCHANGE, Meta
from cloudfs.types import Attr, AttrChanges, DirEntry, FsStats, HandleId, InodeId
from cloudfs.ufs.interface import ObjectStore
from cloudfs.vfs.files import FileIO
from cloudfs.vfs.handles import DirHandle, HandleTable
from cloudfs.vfs.inode_reads import InodeReads

log = logging.getLogger(__name__)

T = TypeVar("T")

READDIR_PAGE = 1000


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: from the FUSE request context."""

    uid: int
    gid: int
    pid: int = 0
    umask: int = 0o022


class Vfs:
    def __init__(
        self,
        meta: Meta,
        store: ObjectStore,
        reader: ObjectReader,
        staging_dir: str,
        *,
        read_only: bool = False,
        meta_threads: int = 8,
        ufs_threads: int = 16,
    ) -> None:
        self.meta = meta
        self.read_only = read_only
        self._meta_limiter = trio.CapacityLimiter(meta_threads)
        self._dirs: HandleTable[DirHandle] = HandleTable()
        self.files = FileIO(
            meta,
            store,
            reader,
            staging_dir,
            self._meta,
            self._read,
            trio.CapacityLimiter(ufs_threads),
            read_only,
            shared_tree=not meta.local_reads,
        )
        self.inode_reads = InodeReads(meta, reader, self._read)

    async def _meta(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(partial(fn, *args), limiter=self._meta_limiter)

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        """A short local tree call: inline when the tree is local (it cannot block for long).

        Reads (getattr, object_key, readlink, xattrs) and the open/release
        bookkeeping of files. A worker-thread hop costs ~0.2 ms, more than these.
        """
        if self.meta.local_reads:
            return fn(*args)
        return await self._meta(fn, *args)

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnly()

    # -- attributes ----------------------------------------------------------

    async def lookup(self, parent: InodeId, name: bytes) -> Attr:
        attr = None
        if self.meta.local_reads:  # no thread hop unless the directory must be listed
            attr = self.meta.lookup_if_listed(parent, name)
        if attr is None:
            attr = await self._meta(self.meta.lookup, parent, name)
        self.inode_reads.seen(attr)
        return self.files.overlay(attr)

    async def getattr(self, inode: InodeId) -> Attr:
        attr = await self._read(self.meta.getattr, inode)
        self.inode_reads.seen(attr)
        return self.files.overlay(attr)

    async def setattr(self, inode: InodeId, changes: AttrChanges) -> Attr:
        self._check_writable()
        if changes.size is not None:  # the one change whose checks need the file's type
            attr = await self._read(self.meta.getattr, inode)
            if attr.is_dir:
                raise IsADirectory()
            if not attr.is_reg:
                raise InvalidArgument("truncate of a special file")
            await self.files.truncate(attr, changes.size)
        if changes.mtime_ns is not None:
            self.files.set_pending_mtime(inode, changes.mtime_ns)
        rest = replace(changes, size=None)
        if rest != AttrChanges() or changes.size is not None:
            attr = await self._meta(self.meta.setattr, inode, rest)
        else:  # only a pending mtime, kept for the upload
            attr = await self._read(self.meta.getattr, inode)
        return self.files.overlay(attr)

    async def statfs(self) -> FsStats:
        return await self._meta(self.meta.statfs)

    # -- directories ---------------------------------------------------------

    async def opendir(self, inode: InodeId) -> HandleId:
        if self.read_only:  # no rmdir here to survive: no tree bookkeeping, no thread hop
            if not (await self._read(self.meta.getattr, inode)).is_dir:
                raise NotADirectory()
            return self._dirs.add(DirHandle(inode, held=False))
        attr = await self._meta(self.meta.open, inode)  # an open directory survives rmdir
        if not attr.is_dir:
            await self._meta(self.meta.release, inode)
            raise NotADirectory()
        return self._dirs.add(DirHandle(inode))

    async def readdir(self, fh: int, index: int) -> tuple[Iterator[DirEntry], int]:
        """Entries from position ``index`` on (at least one page if any remain).

        Returns them with the position of the first one. Positions are stable
        for the life of the handle, as the kernel's readdir offsets must be.
        The entries come lazily: the kernel's buffer takes a few dozen of them
        per request, and a listing of n entries must not cost n² work.
        """
        handle = self._dirs.get(fh)
        while index >= len(handle.entries) and not handle.complete:
            after = handle.entries[-1].name if handle.entries else None
            page = await self._meta(self.meta.readdir, handle.inode, after, READDIR_PAGE)
            for entry in page:
                self.inode_reads.seen(entry.attr)
            handle.entries.extend(page)
            handle.complete = len(page) < READDIR_PAGE
        return self._overlaid(handle.entries, index), index

    def _overlaid(self, entries: list[DirEntry], index: int) -> Iterator[DirEntry]:
        for i in range(index, len(entries)):
            entry = entries[i]
            attr = self.files.overlay(entry.attr)
            yield entry if attr is entry.attr else replace(entry, attr=attr)

    async def releasedir(self, fh: int) -> None:
        handle = self._dirs.pop(fh)
        if handle.held:
            await self._meta(self.meta.release, handle.inode)

    async def mkdir(self, parent: InodeId, name: bytes, mode: int, caller: Caller) -> Attr:
        self._check_writable()
        mode = stat.S_IFDIR | (mode & 0o7777)  # the tree applies a set-group-ID parent's rule
        return await self._meta(self.meta.mkdir, parent, name, mode, caller.uid, caller.gid)

    async def rmdir(self, parent: InodeId, name: bytes) -> None:
        self._check_writable()
        await self._meta(self.meta.rmdir, parent, name)

    # -- names -----------------------------------------------------------------

    async def mknod(
        self, parent: InodeId, name: bytes, mode: int, rdev: int, caller: Caller
    ) -> Attr:
        self._check_writable()
        # the tree applies a set-group-ID parent's rule (its group, for directories its bit)
        return await self._meta(self.meta.create, parent, name, mode, caller.uid, caller.gid, rdev)

    async def create(
        self, parent: InodeId, name: bytes, mode: int, flags: int, caller: Caller
    ) -> tuple[HandleId, Attr]:
        if not self.files.shared_tree:  # an embedded tree: no open to count, calls are cheap
            self._check_writable()
            # Inline, as lookups are: the kernel holds the directory's lock from the
            # LOOKUP to this answer, so creates in one directory queue behind each other
            # and a worker-thread hop here would set the rate of new files.
            made = self.meta.create_if_ready(parent, name, mode & 0o7777, caller.uid, caller.gid)
            if made is None:
                made = await self.mknod(parent, name, stat.S_IFREG | (mode & 0o7777), 0, caller)
            return await self.files.created(made, flags), made
        self._check_writable()
        attr, key = await self._meta(
            self.meta.create_open, parent, name, mode & 0o7777, caller.uid, caller.gid
        )  # create, open and object key in one tree call
        return await self.files.created(attr, flags, key), attr

    async def open(self, inode: InodeId, flags: int) -> tuple[HandleId, bool]:
        return await self.files.open(inode, flags)

    async def read(self, fh: int, offset: int, size: int) -> bytes | memoryview:
        return await self.files.read(fh, offset, size)

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        return await self.files.write(fh, offset, data)

    async def flush(self, fh: int) -> None:
        await self.files.flush(fh)

    async def fsync(self, fh: int) -> None:
        await self.files.fsync(fh)

    async def release(self, fh: int) -> None:
        await self.files.release(fh)

    async def read_inode(self, inode: InodeId, offset: int, size: int) -> bytes | memoryview:
        """A read the kernel sent without an open (dataset mode): keyed by inode."""
        return await self.inode_reads.read(inode, offset, size)

    def forget_version(self, inode: InodeId) -> None:
        """``inode`` changed elsewhere: its next read resolves its object again."""
        self.inode_reads.forget(inode)

    async def symlink(self, parent: InodeId, name: bytes, target: bytes, caller: Caller) -> Attr:
        self._check_writable()
        return await self._meta(self.meta.symlink, parent, name, target, caller.uid, caller.gid)

    async def readlink(self, inode: InodeId) -> bytes:
        return await self._read(self.meta.readlink, inode)

    async def link(self, inode: InodeId, new_parent: InodeId, new_name: bytes) -> Attr:
        self._check_writable()
        return self.files.overlay(await self._meta(self.meta.link, inode, new_parent, new_name))

    async def unlink(self, parent: InodeId, name: bytes) -> None:
        self._check_writable()
        attr = await self._meta(self.meta.lookup, parent, name)
        await self.files.before_unlink(attr)
        async with self.files.uploads_held([attr.inode]):
            after = await self._meta(self.meta.unlink, parent, name)
        self.files.after_unlink(after)

    async def rename(
        self, parent: InodeId, name: bytes, new_parent: InodeId, new_name: bytes, flags: int
    ) -> None:
        self._check_writable()
        victim: Attr | None = None
        if not flags & RENAME_EXCHANGE:
            victim = await self._lookup_or_none(new_parent, new_name)
            if victim is not None and not victim.is_dir:
                await self.files.before_unlink(victim)
        renamed = await self._renamed_files(parent, name, new_parent, new_name, victim, flags)
        async with self.files.uploads_held(renamed):
            await self._meta(self.meta.rename, parent, name, new_parent, new_name, flags)
        self.files.namespace_changed()
        if victim is not None and not victim.is_dir:
            try:
                self.files.after_unlink(await self._read(self.meta.getattr, victim.inode))
            except NotFound:
                self.files.after_unlink(replace(victim, nlink=0))

    async def _lookup_or_none(self, parent: InodeId, name: bytes) -> Attr | None:
        try:
            attr: Attr = await self._meta(self.meta.lookup, parent, name)
        except NotFound:
            return None
        return attr

    async def _renamed_files(
        self,
        parent: InodeId,
        name: bytes,
        new_parent: InodeId,
        new_name: bytes,
        victim: Attr | None,
        flags: int,
    ) -> list[InodeId]:
        """The files whose keys a rename changes (the moved, the replaced or exchanged),
        looked up only where write-back uploads of them may be owed."""
        if self.files.committer.uploader is None:
            return []
        found = [await self._lookup_or_none(parent, name), victim]
        if flags & RENAME_EXCHANGE:
            found.append(await self._lookup_or_none(new_parent, new_name))
        return [attr.inode for attr in found if attr is not None and attr.is_reg]

    # -- xattrs ----------------------------------------------------------------

    async def getxattr(self, inode: InodeId, name: bytes) -> bytes:
        if self.files.without_xattrs(inode):
            raise NoAttribute(f"{name!r}")
        return await self._read(self.meta.getxattr, inode, name)

    async def setxattr(self, inode: InodeId, name: bytes, value: bytes, flags: int) -> None:
        self._check_writable()
        self.files.xattrs_changed(inode)
        await self._meta(self.meta.setxattr, inode, name, value, flags)

    async def listxattr(self, inode: InodeId) -> list[bytes]:
        return await self._read(self.meta.listxattr, inode)

    async def removexattr(self, inode: InodeId, name: bytes) -> None:
        self._check_writable()
        await self._meta(self.meta.removexattr, inode, name)
