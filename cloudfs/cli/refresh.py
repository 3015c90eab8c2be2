"""``cloudfs refresh PATH...``: see changes made in the UFS now, not after ``--meta-ttl``.

Each directory named (or the directory of each file named) is listed from the
UFS at once, and what changed is dropped from the kernel's caches, so a
dataset-mode mount with a long TTL shows a rewritten or new file right away.
"""

from __future__ import annotations

import argparse
import os
import stat
from collections import defaultdict
from typing import Any

from cloudfs.control import client
from cloudfs.errors import UsageError


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "refresh",
        help="list directories of a mount from the UFS again now",
        description=__doc__,
    )
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="a directory, or a file (new or not) in one"
    )
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (120)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    by_mount: dict[str, list[int]] = defaultdict(list)
    for path in args.paths:
        mountpoint = client.mountpoint_of(path)
        by_mount[mountpoint].append(_directory_inode(path))
    directories = changes = 0
    for mountpoint, inodes in by_mount.items():
        request = {"op": "refresh", "inodes": sorted(set(inodes))}
        answer = client.result(mountpoint, request, timeout=args.timeout)
        directories += int(answer["directories"])
        changes += int(answer["changes"])
    print(
        f"refreshed {directories} director{'y' if directories == 1 else 'ies'}: "
        f"{changes} change{'' if changes == 1 else 's'}"
    )
    return 0


def _directory_inode(path: str) -> int:
    """The inode of ``path`` if it is a directory, else of the directory holding it
    (also when ``path`` is not there yet: a file just put into the UFS)."""
    try:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        if st is None or not stat.S_ISDIR(st.st_mode):
            st = os.stat(os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from None
    return st.st_ino
