"""``cloudfs refresh [-r] PATH...``: see changes made in the UFS now, not after ``--meta-ttl``.

Each directory named (or the directory of each file named) is listed from the
UFS at once, and what changed is dropped from the kernel's caches, so a
dataset-mode mount with a long TTL shows a rewritten or new file right away.

With ``-r`` (``--recursive``), every directory under a directory named that
the mount has listed is listed again too, ``--parallel`` at a time, with a
progress bar; directories never listed are left alone (their first access
lists them). A directory that cannot be listed is reported and its
subdirectories skipped; the rest goes on, and the exit status is 1. A file
named with ``-r`` refreshes its directory only, as without.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections import defaultdict
from typing import Any

from tqdm import tqdm

from cloudfs.control import client
from cloudfs.errors import UsageError

MAX_PARALLEL = 64


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "refresh",
        help="list directories of a mount from the UFS again now",
        description=__doc__,
    )
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="a directory, or a file (new or not) in one"
    )
    p.add_argument(
        "-r", "--recursive", action="store_true",
        help="also every directory under it that the mount has listed",
    )  # fmt: skip
    p.add_argument(
        "-p", "--parallel", type=int, default=8, help="directories listed at once with -r (8)"
    )
    p.add_argument(
        "--timeout", type=float, default=120.0,
        help="seconds to wait for the mount (with -r: for each next directory) (120)",
    )  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="no progress bar with -r")
    p.set_defaults(run=run)


class Outcome:
    """What the mounts answered, added up."""

    def __init__(self) -> None:
        self.directories = 0
        self.changes = 0
        self.failures: list[str] = []

    def add(self, answer: dict[str, Any]) -> None:
        self.directories += int(answer["directories"])
        self.changes += int(answer["changes"])


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.parallel <= MAX_PARALLEL:
        raise UsageError(f"--parallel must be between 1 and {MAX_PARALLEL}")
    plain: dict[str, list[int]] = defaultdict(list)
    trees: dict[str, dict[int, str]] = defaultdict(dict)  # inode -> the path named
    for path in args.paths:
        mountpoint = client.mountpoint_of(path)
        inode, is_dir = _directory_inode(path)
        if args.recursive and is_dir:
            trees[mountpoint].setdefault(inode, path)
        else:
            plain[mountpoint].append(inode)
    outcome = Outcome()
    for mountpoint, inodes in plain.items():
        request = {"op": "refresh", "inodes": sorted(set(inodes))}
        outcome.add(client.result(mountpoint, request, timeout=args.timeout))
    for mountpoint, roots in trees.items():
        _refresh_trees(mountpoint, list(roots.items()), args, outcome)
    directories, changes = outcome.directories, outcome.changes
    failed = f", {len(outcome.failures)} failed" if outcome.failures else ""
    print(
        f"refreshed {directories} director{'y' if directories == 1 else 'ies'}: "
        f"{changes} change{'' if changes == 1 else 's'}{failed}"
    )
    for line in outcome.failures[:10]:
        print(f"cloudfs: cannot refresh {line}", file=sys.stderr)
    if len(outcome.failures) > 10:
        print(f"cloudfs: ... and {len(outcome.failures) - 10} more", file=sys.stderr)
    return 1 if outcome.failures else 0


def _refresh_trees(
    mountpoint: str, roots: list[tuple[int, str]], args: argparse.Namespace, outcome: Outcome
) -> None:
    """Refresh the listed directories under ``roots`` (inode, path named), with progress."""
    request = {
        "op": "refresh",
        "inodes": [inode for inode, _ in roots],
        "recursive": True,
        "parallel": args.parallel,
    }
    bar = tqdm(
        total=len(roots), unit="dir", desc="refresh",
        disable=args.no_progress or None, dynamic_ncols=True,
    )  # fmt: skip
    found = len(roots)
    changes = 0
    with bar:
        for event in client.call(mountpoint, request, timeout=args.timeout):
            if event.get("done"):
                outcome.add(event)
                continue
            if "failed" in event:
                where = _below(roots[int(event["root"])][1], str(event["path"]))
                outcome.failures.append(f"{where}: {event['failed']}")
            else:
                found += int(event["found"])
                bar.total = found
                changes += int(event["changes"])
            bar.update(1)
            bar.set_postfix(changes=changes, refresh=False)


def _below(root: str, relative: str) -> str:
    return os.path.join(root, relative) if relative else root


def _directory_inode(path: str) -> tuple[int, bool]:
    """The inode of ``path`` if it is a directory, else of the directory holding it
    (also when ``path`` is not there yet: a file just put into the UFS); and which."""
    try:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            return st.st_ino, True
        return os.stat(os.path.dirname(os.path.abspath(path))).st_ino, False
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from None
