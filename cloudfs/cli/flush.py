"""``cloudfs flush MOUNTPOINT``: wait until every file closed on a mount is in the UFS.

With ``--write-mode back`` a close returns once the bytes are durable in the
mount's journal; this waits for the uploads, with a progress bar (bytes still
owed, files, the oldest one's age, failed attempts). Exit status 0 when
everything is uploaded, 1 when ``--timeout`` passed first (nothing is lost:
the uploads go on).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tqdm import tqdm

from cloudfs.control import client
from cloudfs.lib.jsonlines import Message
from cloudfs.sizes import format_size, parse_seconds


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "flush", help="wait until written files are uploaded", description=__doc__
    )
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    p.add_argument("--timeout", help="give up after this many seconds (default: wait)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    mountpoint = client.mountpoint_of(args.mountpoint)
    timeout = parse_seconds(args.timeout) if args.timeout is not None else None
    result = flush(mountpoint, timeout, progress=not args.quiet)
    if result["drained"]:
        print(f"{mountpoint}: everything written is in the object store")
        return 0
    print(
        f"cloudfs: {mountpoint}: {result['files']} files ({format_size(result['bytes'])}) "
        f"still not uploaded after {timeout:g} s; uploads go on",
        file=sys.stderr,
    )
    return 1


def flush(mountpoint: str, timeout: float | None, *, progress: bool) -> Message:
    """Ask the mount to drain its write-back backlog; show progress; return its result."""
    request: Message = {"op": "flush"}
    if timeout is not None:
        request["timeout"] = timeout
    bar = tqdm(
        total=0, unit="B", unit_scale=True, unit_divisor=1024, desc="flush",
        disable=not progress or None, dynamic_ncols=True,
    )  # fmt: skip
    peak = 0
    with bar:
        # A progress event arrives every half second: the line timeout only
        # has to cover one of them.
        for event in client.call(mountpoint, request, timeout=30.0):
            owed = int(event["bytes"])
            peak = max(peak, owed)
            bar.total = peak
            bar.n = peak - owed
            bar.set_postfix(
                files=event["files"], oldest=f"{float(event['oldest_age']):.0f}s",
                failures=event["failures"], refresh=False,
            )  # fmt: skip
            bar.refresh()
            if event.get("done"):
                return event
    raise AssertionError("unreachable: call() ends with the done line")
