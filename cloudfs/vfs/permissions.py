"""POSIX permission checks the VFS makes itself.

The kernel enforces permissions on every path walk and open because the mount
uses ``default_permissions``; this module answers ``access(2)`` when asked, and
the rules the kernel leaves to the filesystem (setgid inheritance).
"""

from __future__ import annotations

import os

from cloudfs.types import Attr


def may_access(attr: Attr, uid: int, gids: set[int], mask: int) -> bool:
    """Whether a caller with ``uid``/``gids`` may access ``attr`` with ``mask`` (R/W/X_OK)."""
    if mask == os.F_OK:
        return True
    if uid == 0:
        # root may read and write anything, and execute where any x bit is set
        return not (mask & os.X_OK) or attr.is_dir or bool(attr.mode & 0o111)
    if uid == attr.uid:
        granted = (attr.mode >> 6) & 7
    elif attr.gid in gids:
        granted = (attr.mode >> 3) & 7
    else:
        granted = attr.mode & 7
    return (granted & mask) == mask
