"""Paths a job names, resolved by the mount as the kernel would for that job's user.

The hints socket is open to every user, so a path counts only if the caller
could read the file itself: search permission on every directory on the way
and read permission on the file, by the caller's uid and groups (root may read
anything). Paths are relative to the mount's root. Directories met on the way
are remembered (a few thousand at most), so an epoch of files in a few
directories costs one tree lookup a file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass

from cloudfs.errors import FsError
from cloudfs.meta.interface import Meta
from cloudfs.types import ROOT_INODE, Attr, InodeId

DIRS_REMEMBERED = 4096
_READ, _SEARCH = 4, 1


@dataclass(frozen=True)
class Caller:
    uid: int
    gids: frozenset[int]

    @classmethod
    def of(cls, pid: int, uid: int, gid: int) -> Caller:
        """The caller with its supplementary groups (from /proc; the primary only if gone)."""
        gids = {gid}
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("Groups:"):
                        gids.update(int(g) for g in line.split()[1:])
        except (OSError, ValueError):
            pass
        return cls(uid, frozenset(gids))

    def may(self, attr: Attr, bits: int) -> bool:
        if self.uid == 0:
            return True
        if attr.uid == self.uid:
            granted = attr.mode >> 6
        elif attr.gid in self.gids:
            granted = attr.mode >> 3
        else:
            granted = attr.mode
        return granted & bits == bits


class Resolver:
    def __init__(self, meta: Meta, caller: Caller) -> None:
        self._meta = meta
        self._caller = caller
        self._dirs: OrderedDict[str, InodeId] = OrderedDict()

    def file(self, path: str) -> Attr:
        """The attributes of the regular file at ``path`` (relative to the mount's root).

        Raises ``FsError``: ENOENT, EACCES (the caller may not read it), EISDIR or
        EINVAL (not a regular file), ENAMETOOLONG; blocking (tree lookups)."""
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if not parts or ".." in parts:
            raise FsError(f"{path!r}: not a file path inside the mount", errno=errno.EINVAL)
        parent = self._directory(parts[:-1])
        attr = self._meta.lookup(parent, os.fsencode(parts[-1]))
        if attr.is_dir:
            raise FsError(f"{path}: a directory", errno=errno.EISDIR)
        if not stat.S_ISREG(attr.mode):
            raise FsError(f"{path}: not a regular file", errno=errno.EINVAL)
        if not self._caller.may(attr, _READ):
            raise FsError(f"{path}: permission denied", errno=errno.EACCES)
        return attr

    def _directory(self, parts: list[str]) -> InodeId:
        key = "/".join(parts)
        found = self._dirs.get(key)
        if found is not None:
            self._dirs.move_to_end(key)
            return found
        if parts:
            attr = self._meta.lookup(self._directory(parts[:-1]), os.fsencode(parts[-1]))
            if not attr.is_dir:
                raise FsError(f"{key}: not a directory", errno=errno.ENOTDIR)
        else:
            attr = self._meta.getattr(ROOT_INODE)
        if not self._caller.may(attr, _SEARCH):
            raise FsError(f"{key or '/'}: permission denied", errno=errno.EACCES)
        self._dirs[key] = attr.inode
        while len(self._dirs) > DIRS_REMEMBERED:
            self._dirs.popitem(last=False)
        return attr.inode
