"""Run a command in a fresh mount namespace without holding other processes' FUSE mounts.

    unshare --mount --propagation unchanged -- \\
        python3 -m tests.sidecar.own_namespace [--keep PATH]... -- COMMAND...

A new mount namespace starts with a copy of every mount of its parent. A copy of
a FUSE mount that is private (``/`` is private on this machine, so most are)
keeps that filesystem alive: another test's unmount in the parent does not reach
the copy, so its daemon would serve on until this namespace ends. So before it
execs COMMAND this detaches, in its own namespace only, every FUSE mount that is
not ``shared`` (an unmount of a shared one would travel back to its peers; those
receive the other tests' unmounts anyway), except at or under ``--keep`` paths.
Only mounts whose parent is not FUSE are detached (their subtrees go with them),
so no path walk passes through a FUSE filesystem that might not answer.
"""

from __future__ import annotations

import ctypes
import os
import sys

from cloudfs import mountinfo

MNT_DETACH = 2


def _is_fuse(mount: mountinfo.Mount) -> bool:
    return mount.fs_type in ("fuse", "fuseblk") or mount.fs_type.startswith("fuse.")


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def detach_foreign_fuse(keep: list[str]) -> None:
    mounts = mountinfo.read()
    by_id = {m.mount_id: m for m in mounts}
    libc = ctypes.CDLL(None, use_errno=True)
    for mount in mounts:
        parent = by_id.get(mount.parent_id)
        if not _is_fuse(mount) or (parent is not None and _is_fuse(parent)):
            continue
        if any(f.startswith("shared:") for f in mount.optional_fields):
            continue
        if _under(mount.mount_point, keep):
            continue
        libc.umount2(os.fsencode(mount.mount_point), MNT_DETACH)  # a failure leaves it be


def main(argv: list[str]) -> None:
    keep: list[str] = []
    while argv and argv[0] == "--keep":
        keep.append(os.path.realpath(argv[1]))
        argv = argv[2:]
    if not argv or argv[0] != "--":
        sys.exit("usage: own_namespace [--keep PATH]... -- COMMAND...")
    command = argv[1:]
    detach_foreign_fuse(keep)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
