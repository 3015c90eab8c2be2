"""Commits: a closed file's bytes into the UFS, its new version into the tree.

Write-through (``upload``): the staged copy is uploaded as the file's object,
then its ETag, size and mtime are committed to the tree; a rename or unlink in
the mount while the upload ran moves (or deletes) what was uploaded. Write-back
(``seal``): the detached staged copy is moved durably into the uploader's journal and
its size recorded in the tree as pending; the uploader commits it later
through this class, its ``UploadSink``.

The VFS (``vfs/files.py``) decides when a file is committed and holds the
open-file state; this class only talks to the UFS and the tree, and reports
each committed version to ``remember`` (the VFS keeps the kernel's page cache
of a file whose version it knows) and each upload that finished behind an open
file to ``uploaded_behind`` (its reads move to the new object).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import trio

from cloudfs.data.journal import JournalEntry
from cloudfs.data.staging import StagedFile
from cloudfs.data.uploader import Uploader
from cloudfs.errors import FsError, NotFound, ObjectChanged
from cloudfs.meta.interface import Meta
from cloudfs.types import Attr, InodeId, ObjectInfo
from cloudfs.ufs.interface import ObjectStore

log = logging.getLogger(__name__)

# A commit refused because the file was renamed while its bytes went up is followed
# (the object moved to the new key) at most this many times in a row.
MAX_RENAMES_FOLLOWED = 8


class Committer:
    def __init__(
        self,
        meta: Meta,
        store: ObjectStore,
        meta_call: Callable[..., Awaitable[Any]],
        meta_read: Callable[..., Awaitable[Any]],
        remember: Callable[[Attr], None],
        uploaded_behind: Callable[[InodeId], None],
    ) -> None:
        """``meta_call``/``meta_read``: run a tree change / a short tree read (the VFS's
        thread policy)."""
        self._meta = meta
        self._store = store
        self._call = meta_call
        self._read = meta_read
        self._remember = remember
        self._uploaded_behind = uploaded_behind
        self.uploader: Uploader | None = None
        self.write_back = False

    def journaled(self, inode: InodeId) -> bool:
        """Whether ``inode``'s next commit goes to the journal (write-back, or bytes of
        it already owed there: an upload must not overtake them)."""
        uploader = self.uploader
        return uploader is not None and (self.write_back or uploader.pending(inode) is not None)

    async def key_of(self, inode: int, *, upload: bool = True) -> str | None:
        """The file's UFS key now; ``None`` if it has no name left (``UploadSink``: for an
        upload; ``upload=False``: a close's key, which only advises the upload)."""
        get = functools.partial(self._meta.object_key, upload=upload)
        try:
            key: str = await self._read(get, InodeId(inode))
        except NotFound:
            return None
        return key

    async def upload(
        self,
        inode: InodeId,
        staged: StagedFile,
        key: str,
        size: int,
        mtime_ns: int,
        moved: Callable[[], bool],
    ) -> bool:
        """Write-through: upload ``staged`` as ``key`` and commit it.

        ``moved()`` says whether a rename or unlink happened in the mount
        meanwhile. Returns False if the file lost its last name meanwhile (what
        was uploaded is deleted, nothing committed).
        """
        try:
            info = await staged.upload(self._store, key)
            if moved():  # a rename or unlink in the mount meanwhile: follow it now
                info = await self._at_key(inode, info)
                if not info.key:
                    return False
            attr = await self._commit(inode, size, mtime_ns, info)
        except FsError:
            log.error("upload of inode %d to %r failed: close() reports the error", inode, key)
            raise
        if attr is None:
            return False
        self._remember(attr)
        return True

    async def seal(
        self, inode: InodeId, path: str, fd: int, key: str, size: int, mtime_ns: int
    ) -> None:
        """Write-back: journal the detached staged copy at ``path`` (open as ``fd``, which
        the journal closes) durably, then record its size as pending (the file at
        ``path`` is the journal's, or gone, after)."""
        uploader = self.uploader
        assert uploader is not None, "seal() without an uploader: check journaled() first"
        try:
            await uploader.seal(inode, key, size, mtime_ns, path, fd=fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        attr: Attr = await self._call(self._meta.commit_pending, inode, size, mtime_ns)
        self._remember(attr)

    async def uploaded(self, entry: JournalEntry, info: ObjectInfo) -> None:
        """``entry``'s bytes are in the UFS as ``info``: commit them (``UploadSink``)."""
        inode = InodeId(entry.inode)
        attr = await self._commit(inode, entry.size, entry.mtime_ns, info)
        if attr is None:
            return
        self._remember(attr)
        self._uploaded_behind(inode)

    async def _commit(
        self, inode: InodeId, size: int, mtime_ns: int, info: ObjectInfo
    ) -> Attr | None:
        """Commit bytes put as ``info``, on condition that the file's key is still
        ``info.key``; a rename that came between moves the object after it first.
        None: the file lost its last name (the object is deleted, nothing committed)."""
        for _ in range(MAX_RENAMES_FOLLOWED):
            try:
                attr: Attr = await self._call(
                    self._meta.commit_upload, inode, size, mtime_ns, info.etag, info.key
                )
                return attr
            except NotFound:  # unlinked after the put: nobody may see the object
                await trio.to_thread.run_sync(self._store.delete, info.key)
                return None
            except ObjectChanged:  # renamed since the last look at its key
                info = await self._at_key(inode, info)
                if not info.key:
                    return None
        raise ObjectChanged(f"inode {inode}: renamed {MAX_RENAMES_FOLLOWED} times during commit")

    async def _at_key(self, inode: InodeId, info: ObjectInfo) -> ObjectInfo:
        """The object ``info`` moved to the file's key now (deleted, and key "", if the
        file has no name left)."""
        key = await self.key_of(inode)
        if key == info.key:
            return info
        if key is None:
            await trio.to_thread.run_sync(self._store.delete, info.key)
            return replace(info, key="")
        moved: ObjectInfo = await trio.to_thread.run_sync(
            self._store.rename, info.key, key, info.etag
        )  # only the bytes put: another file may have been put under that name since
        return moved
