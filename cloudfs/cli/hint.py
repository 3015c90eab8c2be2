"""``cloudfs hint MOUNTPOINT --file-list ORDER.txt``: announce a job's reading order.

For loaders that are not PyTorch (``tf.data``, JAX, a shell script): write the
epoch's paths in reading order, one a line (absolute, or relative to
MOUNTPOINT), and announce them. The mount fetches ahead of the reads along
that order and evicts by it (see ``cloudfs.hints``). The announcement outlives
this command and ends two minutes after the job stops reading; ``--hold``
keeps it alive only while this command runs instead.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from cloudfs import hints
from cloudfs.control import client
from cloudfs.errors import StartupError, UsageError


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "hint",
        help="announce the order a job reads its files in",
        description=__doc__,
    )
    p.add_argument("mountpoint", metavar="MOUNTPOINT", help="a CloudFS mount")
    p.add_argument(
        "--file-list", required=True, metavar="FILE", help="paths in reading order ('-': stdin)"
    )
    p.add_argument("--job", default=None, help="job name ($CLOUDFS_JOB, else cloudfs-PID)")
    p.add_argument("--epoch", type=int, default=0, help="epoch number (0)")
    p.add_argument("--rank", type=int, default=0, help="rank of this process in the job (0)")
    p.add_argument(
        "--hold", action="store_true", help="keep the announcement only while this command runs"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.epoch < 0 or args.rank < 0:
        raise UsageError("--epoch and --rank must be at least 0")
    mountpoint = client.mountpoint_of(args.mountpoint)
    stream = _open_list(args.file_list)
    try:
        announcement = hints.announce(
            _paths(stream, mountpoint), job=args.job, epoch=args.epoch, rank=args.rank,
            detach=not args.hold,
        )  # fmt: skip
    except hints.HintError as e:
        raise StartupError(str(e)) from None
    finally:
        if stream is not sys.stdin:
            stream.close()
    _report(announcement, mountpoint)
    if announcement.accepted == 0:
        return 1
    if args.hold:
        print("holding the announcement; Ctrl-C ends it", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            signal.pause()
        finally:
            announcement.close()
    return 0


def _open_list(name: str) -> TextIO:
    if name == "-":
        return sys.stdin
    try:
        return open(name, encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise UsageError(f"{name}: {e.strerror}") from None


def _paths(stream: TextIO, mountpoint: str) -> Iterator[str]:
    for line in stream:
        path = line.rstrip("\n")
        if path.strip():
            yield path if os.path.isabs(path) else os.path.join(mountpoint, path)


def _report(announcement: hints.Announcement, mountpoint: str) -> None:
    ratio = announcement.cached_ratio.get(mountpoint, 0.0)
    print(
        f"announced {announcement.accepted} files to {mountpoint} "
        f"({100 * ratio:.0f}% of their bytes cached)"
    )
    if announcement.skipped:
        reasons = ", ".join(f"{n} {why}" for why, n in announcement.reasons.most_common())
        print(f"skipped {announcement.skipped}: {reasons}", file=sys.stderr)
