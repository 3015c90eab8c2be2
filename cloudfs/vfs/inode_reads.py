"""Reads by inode, for mounts where the kernel skips ``open`` (dataset mode).

In dataset mode the mount answers the first OPEN with ENOSYS; from then on the
kernel sends neither OPEN, FLUSH nor RELEASE, keeps each file's page cache
across opens, and sends READ with the inode where a handle would be (the
pyfuse3 patch in ``deploy/pyfuse3/``). So there is no handle to hold the
object's identity: ``InodeReads`` keeps one per inode instead, the
``ObjectRef`` (key, ETag, size) resolved from the tree at the first read, with
a read-ahead cursor.

An inode's version is dropped (and resolved again at its next read) when the
tree hands out attributes with another ETag or size (a lookup or getattr after
a re-listing), and when a change is pushed (the tree service's change stream,
a re-listing, ``cloudfs refresh``) before the kernel's copy is dropped: a read
never mixes two versions' blocks, since each block's cache key carries the
ETag. ``forget`` may be called from any thread (a dict pop under the GIL).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from cloudfs.data.blocks import ObjectRef
from cloudfs.data.reader import ObjectReader, ReadCursor
from cloudfs.errors import IsADirectory
from cloudfs.meta.interface import Meta
from cloudfs.types import Attr, InodeId

# Inodes whose versions are kept; past this the oldest resolved one is dropped
# (it is resolved again, from the local tree or one tree call, at its next read).
VERSIONS_MAX = 200_000


class InodeReads:
    def __init__(
        self,
        meta: Meta,
        reader: ObjectReader,
        meta_read: Callable[..., Awaitable[Any]],
        *,
        max_versions: int = VERSIONS_MAX,
    ) -> None:
        self._meta = meta
        self._reader = reader
        self._meta_read = meta_read
        self._max = max_versions
        # Insertion-ordered: the first key is the oldest resolved version.
        self._versions: dict[InodeId, tuple[ObjectRef, ReadCursor]] = {}

    async def read(self, inode: InodeId, offset: int, size: int) -> bytes | memoryview:
        entry = self._versions.get(inode)
        if entry is None:
            entry = await self._resolve(inode)
        ref, cursor = entry
        if not ref.etag:  # nothing uploaded: an empty file
            return b""
        return await self._reader.read(ref, offset, size, cursor, inode)

    def seen(self, attr: Attr) -> None:
        """The tree handed out ``attr``: drop the inode's version if it is another one."""
        entry = self._versions.get(attr.inode)
        if entry is not None and (entry[0].etag != attr.etag or entry[0].size != attr.size):
            self._versions.pop(attr.inode, None)

    def forget(self, inode: InodeId) -> None:
        """The inode changed: resolve it again at its next read."""
        self._versions.pop(inode, None)

    def __len__(self) -> int:
        return len(self._versions)

    async def _resolve(self, inode: InodeId) -> tuple[ObjectRef, ReadCursor]:
        attr: Attr = await self._meta_read(self._meta.getattr, inode)
        if attr.is_dir:
            raise IsADirectory()
        if attr.etag:
            key: str = await self._meta_read(self._meta.object_key, inode)
            ref = ObjectRef(key=key, etag=attr.etag, size=attr.size)
        else:
            ref = ObjectRef(key="", etag="", size=attr.size)
        entry = (ref, ReadCursor())
        self._versions[inode] = entry
        while len(self._versions) > self._max:
            del self._versions[next(iter(self._versions))]
        return entry
