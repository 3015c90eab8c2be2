"""File contents through the mount: open, read, write, truncate, flush, release.

Reads of a clean file go to the block cache (``ObjectReader``) under the
object's identity (key, ETag) resolved at open, and again after a rename or
unlink in the mount moved objects around. The first write (or truncate) gives the
inode a staged copy on local disk, copy-on-write over the UFS object. Flush,
fsync and release then commit a dirty staged copy through ``data/commit.py``:
uploaded and recorded in the tree (write-through), or, in write-back mode,
moved into the write-back journal of the attached ``Uploader`` with its size
recorded as pending. Until it is uploaded, this mount reads the file from the
journal, and a new write starts from a copy of it. Close-to-open: an open
after a close sees the new bytes.

Opens are counted here, in memory. A shared tree (the tree service) is told of
every open and release, since another mount's unlink must not free a file open
in this one; the embedded tree, which only this mount changes, is told only
when an open file loses a name (``before_unlink``), and of its last release
then: an open and a close cost no tree write.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import replace
from typing import Any, ParamSpec, TypeVar

import trio

from cloudfs.data.blocks import ObjectRef
from cloudfs.data.commit import Committer
from cloudfs.data.journal import JournalEntry
from cloudfs.data.reader import ObjectReader, ReadCursor
from cloudfs.data.space import StagingSpace
from cloudfs.data.staging import StagedFile
from cloudfs.data.uploader import Uploader
from cloudfs.errors import IsADirectory, ReadOnly
from cloudfs.meta.interface import Meta
from cloudfs.types import Attr, HandleId, InodeId
from cloudfs.ufs.interface import ObjectStore
from cloudfs.vfs.handles import FileHandle, HandleTable, OpenInode

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

_SEEN_VERSIONS_MAX = 100_000


class FileIO:
    def __init__(
        self,
        meta: Meta,
        store: ObjectStore,
        reader: ObjectReader,
        staging_dir: str,
        meta_call: Callable[..., Awaitable[Any]],
        meta_read: Callable[..., Awaitable[Any]],
        ufs_limiter: trio.CapacityLimiter,
        read_only: bool,
        *,
        shared_tree: bool = True,
    ) -> None:
        self._meta = meta
        self._store = store
        self._reader = reader
        self._staging_dir = staging_dir
        self._meta_call = meta_call
        self._meta_read = meta_read
        self._ufs_limiter = ufs_limiter
        self._disk_limiter = trio.CapacityLimiter(8)
        self._read_only = read_only
        self._shared_tree = shared_tree
        self._handles: HandleTable[FileHandle] = HandleTable()
        self._open: dict[InodeId, OpenInode] = {}
        # inode -> (etag, size, mtime) at its last open: unchanged means the
        # kernel may keep its page cache for the file across opens.
        self._seen: OrderedDict[InodeId, tuple[str, int, int]] = OrderedDict()
        # Bumped by every rename and unlink: object keys of open files may have moved.
        self._generation = 0
        self.committer = Committer(
            meta, store, meta_call, meta_read, self._remember_attr, self._uploaded_behind
        )
        self.space = StagingSpace()  # no bound until the composition root sets one

    def attach_uploader(self, uploader: Uploader, *, write_back: bool) -> None:
        """Read files still owed to the UFS from ``uploader``'s journal; with
        ``write_back``, close files into it too (else only files already owed:
        bytes from an earlier write-back mount must not be overtaken)."""
        self.committer.uploader = uploader
        self.committer.write_back = write_back
        self.space.count_journal(lambda: uploader.backlog().bytes)

    async def _m(self, fn: Callable[P, T], *args: Any) -> T:
        result: T = await self._meta_call(fn, *args)
        return result

    async def _r(self, fn: Callable[P, T], *args: Any) -> T:
        result: T = await self._meta_read(fn, *args)
        return result

    # -- attributes --------------------------------------------------------

    def overlay(self, attr: Attr) -> Attr:
        """The attributes with the pending size and mtime of a staged copy."""
        oi = self._open.get(attr.inode)
        if oi is None or oi.staged is None or not oi.staged.dirty:
            return attr
        mtime = oi.mtime_ns or attr.mtime_ns
        return replace(
            attr, size=oi.staged.size, mtime_ns=mtime, ctime_ns=max(mtime, attr.ctime_ns)
        )

    # -- open / release ----------------------------------------------------

    async def open(self, inode: InodeId, flags: int) -> tuple[HandleId, bool]:
        """Open a regular file; returns the handle and whether the kernel may keep its cache."""
        writable = (flags & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)
        if self._read_only and (writable or flags & os.O_TRUNC):
            raise ReadOnly()
        attr = await self._hold(inode, write=writable or bool(flags & os.O_TRUNC))
        oi = self._open.setdefault(attr.inode, OpenInode(attr.inode))
        oi.handles += 1
        if attr.is_dir:  # the kernel opens directories with opendir; be safe anyway
            await self._drop_handle(oi)
            raise IsADirectory()
        try:
            if oi.staged is None:
                oi.ref, oi.generation = await self._ref(attr), self._generation
            if writable and flags & os.O_TRUNC:
                staged = await self._staged(oi, new=False)
                if staged.size:
                    await staged.truncate(0)
                    oi.mtime_ns = time.time_ns()
        except BaseException:
            await self._drop_handle(oi)
            raise
        fh = self._handles.add(FileHandle(attr.inode, flags, ReadCursor()))
        version = (attr.etag, attr.size, attr.mtime_ns)
        keep_cache = oi.staged is None and self._seen.get(attr.inode) == version
        self._remember(attr.inode, version)
        if not keep_cache and oi.staged is None and oi.ref is not None:
            self._reader.fetch_on_open(oi.ref)  # a small file is read whole right after
        return fh, keep_cache

    @property
    def shared_tree(self) -> bool:
        """Whether the tree is the tree service's (opens are counted there, per mount)."""
        return self._shared_tree

    async def created(self, attr: Attr, flags: int, key: str | None = None) -> HandleId:
        """A handle on a file ``create`` just made: empty, due for upload (staged on
        its first write or flush: ``OpenInode.fresh``).

        ``key``: ``create_open`` made it, already held open in the tree, at this key."""
        if key is None:
            attr = await self._hold(attr.inode)
        oi = self._open.setdefault(attr.inode, OpenInode(attr.inode))
        if key is not None:
            oi.key, oi.key_generation = key, self._generation
        oi.bare = oi.handles == 0  # no xattr yet: made just now, and held only here
        oi.handles += 1
        if oi.staged is None:
            oi.fresh = True
        oi.mtime_ns = attr.mtime_ns
        return self._handles.add(FileHandle(attr.inode, flags, ReadCursor()))

    async def release(self, fh: int) -> None:
        handle = self._handles.pop(fh)
        oi = self._open[handle.inode]
        try:
            await self._upload_if_dirty(oi)
        finally:
            await self._drop_handle(oi)

    async def _hold(self, inode: InodeId, *, write: bool = False) -> Attr:
        """The attributes of ``inode``, which a handle (a writer: ``write``) is about to
        hold."""
        if self._shared_tree:
            return await self._r(functools.partial(self._meta.open, write=write), inode)
        return await self._r(self._meta.getattr, inode)

    async def _drop_handle(self, oi: OpenInode) -> None:
        oi.handles -= 1
        if oi.handles == 0:
            del self._open[oi.inode]
            if oi.staged is not None:
                await oi.staged.close()
        if self._shared_tree:
            await self._r(self._meta.release, oi.inode)
        elif oi.handles == 0 and oi.held_in_tree:
            oi.held_in_tree = False
            await self._r(self._meta.release, oi.inode)

    # -- read / write ------------------------------------------------------

    async def read(self, fh: int, offset: int, size: int) -> bytes | memoryview:
        handle = self._handles.get(fh)
        oi = self._open[handle.inode]
        if oi.staged is not None:
            return await (await self._staged(oi, new=False)).pread(offset, size)
        pending = self._pending(oi.inode)
        if pending is not None:
            data = await self._read_pending(pending, offset, size)
            if data is not None:
                return data
            oi.generation = -1  # uploaded meanwhile: read the new object
        ref = await self._base(oi)
        if ref is None:
            return b""
        return await self._reader.read(ref, offset, size, handle.cursor, handle.inode)

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        handle = self._handles.get(fh)
        if self._read_only:
            raise ReadOnly()
        oi = self._open[handle.inode]
        if oi.staged is None and oi.fresh:  # a new file's first write: one thread hop
            offset = 0 if handle.append else offset
            oi.staged = await StagedFile.open(
                self._staging_dir, self._staging_name(oi), None, self._reader,
                self._disk_limiter, new=True, space=self.space, first_write=(offset, data),
            )  # fmt: skip
            oi.fresh = False
            written = len(data)
        else:
            staged = await self._staged(oi, new=False)
            if handle.append:
                offset = staged.size
            written = await staged.pwrite(offset, data)
        oi.mtime_ns = time.time_ns()
        return written

    async def flush(self, fh: int) -> None:
        """close(2) of one descriptor: upload pending bytes so errors reach close."""
        handle = self._handles.get(fh)
        await self._upload_if_dirty(self._open[handle.inode])

    async def fsync(self, fh: int) -> None:
        await self.flush(fh)

    # -- truncate and times through setattr --------------------------------

    async def truncate(self, attr: Attr, size: int) -> None:
        """Change a file's size, with or without an open handle."""
        if self._read_only:
            raise ReadOnly()
        oi = self._open.get(attr.inode)
        if oi is not None:
            staged = await self._staged(oi, new=False)
            await staged.truncate(size)
            oi.mtime_ns = time.time_ns()
            return
        # No handle: stage, truncate and upload right away.
        oi = OpenInode(attr.inode, handles=1)
        oi.ref, oi.generation = await self._ref(attr), self._generation
        self._open[attr.inode] = oi
        await self._hold(attr.inode)
        try:
            staged = await self._staged(oi, new=False)
            await staged.truncate(size)
            oi.mtime_ns = time.time_ns()
            await self._upload_if_dirty(oi)
        finally:
            await self._drop_handle(oi)

    def without_xattrs(self, inode: InodeId) -> bool:
        """Whether ``inode`` is a file this mount made and holds, with no xattr set since."""
        oi = self._open.get(inode)
        return oi is not None and oi.bare

    def xattrs_changed(self, inode: InodeId) -> None:
        oi = self._open.get(inode)
        if oi is not None:
            oi.bare = False

    def set_pending_mtime(self, inode: InodeId, mtime_ns: int) -> None:
        """utimens on a file with pending writes: keep the time through the upload."""
        oi = self._open.get(inode)
        if oi is not None and oi.staged is not None and oi.staged.dirty:
            oi.mtime_ns = mtime_ns

    def uploads_held(self, inodes: Iterable[InodeId]) -> AbstractAsyncContextManager[None]:
        """Within: no write-back upload of ``inodes`` runs (a rename or unlink of them)."""
        uploader = self.committer.uploader
        if uploader is None:
            return nullcontext()
        return uploader.held(inodes)

    async def before_unlink(self, attr: Attr) -> None:
        """Keep an open file readable after its last name (and object) goes away."""
        oi = self._open.get(attr.inode)
        if oi is None or not attr.is_reg:
            return
        if not self._shared_tree and not oi.held_in_tree:
            await self._r(self._meta.open, attr.inode)  # the tree keeps it until released
            oi.held_in_tree = True
        if attr.nlink <= 1:
            staged = await self._staged(oi, new=False)
            await staged.materialize()

    def after_unlink(self, attr: Attr) -> None:
        self.namespace_changed()
        oi = self._open.get(attr.inode)
        if oi is not None and attr.nlink == 0:
            oi.unlinked = True
        if attr.nlink == 0 and self.committer.uploader is not None:
            self.committer.uploader.unlinked(attr.inode)  # a journaled copy is owed to nobody now

    def namespace_changed(self) -> None:
        """A rename or unlink happened: re-resolve the objects of open files before use."""
        self._generation += 1

    # -- internals ---------------------------------------------------------

    async def _ref(self, attr: Attr) -> ObjectRef:
        if not attr.etag:
            return ObjectRef(key="", etag="", size=attr.size)
        key = await self._r(self._meta.object_key, attr.inode)
        return ObjectRef(key=key, etag=attr.etag, size=attr.size)

    async def _base(self, oi: OpenInode) -> ObjectRef | None:
        """The UFS object holding an open file's bytes (None: nothing uploaded yet)."""
        if oi.generation != self._generation:
            attr = await self._r(self._meta.getattr, oi.inode)
            oi.ref, oi.generation = await self._ref(attr), self._generation
        if oi.ref is None or not oi.ref.etag:
            return None
        return oi.ref

    async def _staged(self, oi: OpenInode, *, new: bool) -> StagedFile:
        staged = oi.staged
        if staged is not None and staged.base is not None and oi.generation != self._generation:
            ref = await self._base(oi)  # a rename since: its base object may have moved
            if ref is not None:
                staged.rebase(ref)
        if oi.staged is None:
            new = new or oi.fresh
            pending = None if new else self._pending(oi.inode)
            name = self._staging_name(oi)
            if pending is not None:
                try:
                    oi.staged = await StagedFile.open(
                        self._staging_dir, name, None, self._reader, self._disk_limiter,
                        copy_of=pending.data_path, space=self.space,
                    )  # fmt: skip
                    return oi.staged
                except FileNotFoundError:  # uploaded meanwhile: start from the object
                    oi.generation = -1
            base = None if new else await self._base(oi)
            oi.staged = await StagedFile.open(
                self._staging_dir, name, base, self._reader, self._disk_limiter,
                new=new, space=self.space,
            )  # fmt: skip
            oi.fresh = False
        return oi.staged

    @staticmethod
    def _staging_name(oi: OpenInode) -> str:
        return f"{oi.inode}-{time.monotonic_ns()}"

    def _pending(self, inode: InodeId) -> JournalEntry | None:
        uploader = self.committer.uploader
        return uploader.pending(inode) if uploader is not None else None

    async def _read_pending(self, entry: JournalEntry, offset: int, size: int) -> bytes | None:
        """Bytes of a file waiting in the journal; None if it was uploaded meanwhile."""

        def pread() -> bytes | None:
            try:
                fd = os.open(entry.data_path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return None
            try:
                return os.pread(fd, size, offset)
            finally:
                os.close(fd)

        data: bytes | None = await trio.to_thread.run_sync(pread, limiter=self._disk_limiter)
        return data

    async def _upload_if_dirty(self, oi: OpenInode) -> None:
        async with oi.committing:
            await self._upload_if_dirty_locked(oi)

    async def _upload_if_dirty_locked(self, oi: OpenInode) -> None:
        if oi.fresh and not oi.unlinked:  # created, never written: upload it empty
            await self._staged(oi, new=True)
        staged = oi.staged
        if staged is None or not staged.dirty or oi.unlinked:
            return
        if oi.key is not None and oi.key_generation == self._generation:
            key: str | None = oi.key  # a new file's, from create_open: nothing moved it here
        else:
            key = await self.committer.key_of(oi.inode, upload=False)
        if key is None:
            oi.unlinked = True  # the last name went away meanwhile
            return
        size = staged.size
        mtime_ns = oi.mtime_ns or time.time_ns()
        if self.committer.journaled(oi.inode):
            path, fd = await staged.detach()
            oi.staged = None  # its bytes go to the journal
            await self.committer.seal(oi.inode, path, fd, key, size, mtime_ns)
            return
        generation = self._generation
        moved = lambda: generation != self._generation  # noqa: E731
        if not await self.committer.upload(oi.inode, staged, key, size, mtime_ns, moved):
            oi.unlinked = True

    def _uploaded_behind(self, inode: InodeId) -> None:
        oi = self._open.get(inode)
        if oi is not None:
            oi.generation = -1  # its reads go to the new object from now on

    def _remember_attr(self, attr: Attr) -> None:
        self._remember(attr.inode, (attr.etag, attr.size, attr.mtime_ns))

    def _remember(self, inode: InodeId, version: tuple[str, int, int]) -> None:
        self._seen[inode] = version
        self._seen.move_to_end(inode)
        while len(self._seen) > _SEEN_VERSIONS_MAX:
            self._seen.popitem(last=False)
