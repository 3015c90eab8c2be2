"""Open-file and open-directory state of one mount."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import trio

from cloudfs.data.blocks import ObjectRef
from cloudfs.data.reader import ReadCursor
from cloudfs.data.staging import StagedFile
from cloudfs.errors import BadFileHandle
from cloudfs.types import DirEntry, HandleId, InodeId


@dataclass
class OpenInode:
    """What all handles of one inode share: the staged copy and its pending attributes.

    A file gets a staged copy on its first write (copy-on-write over the UFS
    object); every handle then reads and writes it, so writes are visible to
    readers of the same file at once, as on a local filesystem.
    """

    inode: InodeId
    handles: int = 0
    staged: StagedFile | None = None
    # The UFS object behind the file, resolved at open and again after any
    # rename or unlink in the mount (``generation``): renames move objects.
    ref: ObjectRef | None = None
    generation: int = -1
    mtime_ns: int | None = None  # set by writes: the mtime to record at upload
    unlinked: bool = False  # no name left: never upload again
    # An embedded tree was told of this open (a name of it went away): release it there.
    held_in_tree: bool = False
    # Its UFS key as the tree gave it at create, while ``generation`` of the files
    # layer has not moved since (no rename or unlink in the mount): no ObjectKey call.
    key: str | None = None
    key_generation: int = -1
    # Made by this mount and given no xattr since: getxattr is answered here (the
    # kernel asks for security.capability before a new file's first write).
    bare: bool = False
    # Made by create and not staged yet: its staged copy (empty, due for upload) is made
    # on the first write or at the first flush, out of the create's reply (the kernel
    # holds the directory's lock until then, so creates in one directory are serial).
    fresh: bool = False
    # Held while the file's bytes go to the UFS or the journal: a second close at the same
    # moment waits, then finds nothing left to send (one upload, and commits in order).
    committing: trio.Lock = field(default_factory=trio.Lock)


@dataclass
class FileHandle:
    inode: InodeId
    flags: int
    cursor: ReadCursor

    @property
    def writable(self) -> bool:
        return (self.flags & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)

    @property
    def append(self) -> bool:
        return bool(self.flags & os.O_APPEND)


@dataclass
class DirHandle:
    """A directory being listed: the entries fetched so far, in name order.

    The kernel's readdir offset is an index into ``entries``; pages are fetched
    from the tree as the kernel asks for more, so a 10,000-entry directory is
    never held twice.
    """

    inode: InodeId
    entries: list[DirEntry] = field(default_factory=list)
    complete: bool = False
    held: bool = True  # the tree counts it open (released with the handle)


H = TypeVar("H")


class HandleTable(Generic[H]):
    """Handle number -> handle object; numbers are never reused within a mount."""

    def __init__(self) -> None:
        self._handles: dict[int, H] = {}
        self._next = itertools.count(1)

    def add(self, handle: H) -> HandleId:
        fh = next(self._next)
        self._handles[fh] = handle
        return HandleId(fh)

    def get(self, fh: int) -> H:
        try:
            return self._handles[fh]
        except KeyError:
            raise BadFileHandle(f"unknown handle {fh}") from None

    def pop(self, fh: int) -> H:
        try:
            return self._handles.pop(fh)
        except KeyError:
            raise BadFileHandle(f"unknown handle {fh}") from None

    def __len__(self) -> int:
        return len(self._handles)
