"""Plain value types passed between layers."""

from __future__ import annotations

import stat
from dataclasses import dataclass
from typing import Any, NewType

InodeId = NewType("InodeId", int)
HandleId = NewType("HandleId", int)

ROOT_INODE = InodeId(1)
NAME_MAX = 255


@dataclass(frozen=True, slots=True)
class Attr:
    """POSIX attributes of one inode, as the tree holds them."""

    inode: InodeId
    mode: int  # file type bits | permission bits
    nlink: int
    uid: int
    gid: int
    size: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    rdev: int = 0
    # Identity of the UFS object holding a regular file's bytes: part of every
    # block-cache key, so a changed object is never served from a stale block.
    # "" for tree-only inodes (symlinks, fifos, directories) and for files that
    # were created through the mount and not uploaded yet.
    etag: str = ""

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def is_reg(self) -> bool:
        return stat.S_ISREG(self.mode)

    @property
    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self.mode)


@dataclass(frozen=True, slots=True)
class AttrChanges:
    """A partial update for ``Meta.setattr``; ``None`` leaves a field alone."""

    mode: int | None = None  # permission bits only (07777)
    uid: int | None = None
    gid: int | None = None
    size: int | None = None
    atime_ns: int | None = None
    mtime_ns: int | None = None
    ctime_ns: int | None = None
    etag: str | None = None

    def applied(self, current: Any, now: int) -> dict[str, Any]:
        """The fields ``current`` (an ``Attr``, or the tree's record of one) has after these
        changes, for ``dataclasses.replace``; ctime becomes ``now`` unless given."""

        def pick(name: str) -> Any:
            value = getattr(self, name)
            return getattr(current, name) if value is None else value

        mode = (
            current.mode if self.mode is None else stat.S_IFMT(current.mode) | (self.mode & 0o7777)
        )
        return {
            "mode": mode,
            **{name: pick(name) for name in ("uid", "gid", "size", "atime_ns", "mtime_ns", "etag")},
            "ctime_ns": now if self.ctime_ns is None else self.ctime_ns,
        }


@dataclass(frozen=True, slots=True)
class DirEntry:
    name: bytes
    attr: Attr


@dataclass(frozen=True, slots=True)
class FsStats:
    block_size: int
    total_blocks: int
    free_blocks: int
    total_inodes: int
    free_inodes: int
    name_max: int = NAME_MAX


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One object (or directory prefix) in the UFS, as a listing reports it."""

    key: str  # relative to the store root, "/"-separated, no leading "/"
    size: int
    mtime_ns: int
    etag: str
    is_dir: bool = False


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a delimited listing of a directory prefix."""

    objects: list[ObjectInfo]  # files directly under the prefix
    prefixes: list[str]  # sub-directory keys, without trailing "/"
    next_token: str | None  # None on the last page
