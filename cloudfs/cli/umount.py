"""``cloudfs umount MOUNTPOINT``: unmount and wait for the mount process to finish.

A write-back mount is first drained: the files closed on it are uploaded,
with a progress bar, for at most ``--drain-timeout`` seconds (default: the
mount's own ``--drain-timeout``). ``--no-drain`` skips that; what is not
uploaded stays in the mount's journal and is uploaded by the next mount of
the same volume with the same cache directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from typing import Any

from cloudfs.cli import flush
from cloudfs.control import client
from cloudfs.errors import FsError, StartupError, UsageError
from cloudfs.mount import runtime
from cloudfs.mount.checks import is_mounted
from cloudfs.sizes import parse_seconds


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "umount", aliases=["unmount"], help="unmount a CloudFS mount"
    )
    p.add_argument("mountpoint")
    p.add_argument("-z", "--lazy", action="store_true", help="detach now, clean up when unused")
    p.add_argument(
        "--timeout", default="60", help="seconds to wait for the mount process to exit (60)"
    )
    p.add_argument("--no-drain", action="store_true", help="do not wait for write-back uploads")
    p.add_argument("--drain-timeout", help="seconds to wait for write-back uploads")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    timeout = parse_seconds(args.timeout)
    if not is_mounted(args.mountpoint):
        raise UsageError(f"{args.mountpoint} is not mounted")
    pid = runtime.read_pid(os.path.realpath(args.mountpoint))
    if pid is not None and not args.lazy:
        _drain(os.path.realpath(args.mountpoint), args)
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    if tool is None:
        raise StartupError("fusermount3 not found: install the fuse3 package")
    cmd = [tool, "-u", *(["-z"] if args.lazy else []), args.mountpoint]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        reason = (result.stderr or result.stdout).strip().splitlines()
        raise StartupError(f"cannot unmount {args.mountpoint}: {reason[-1] if reason else '?'}")
    if pid is not None and not runtime.wait_for_exit(pid, timeout):
        raise StartupError(f"unmounted, but mount process {pid} is still running")
    return 0


def _drain(mountpoint: str, args: argparse.Namespace) -> None:
    """Upload what the mount owes (or tell it not to wait); best effort if it is wedged."""
    try:
        if args.no_drain:
            client.result(mountpoint, {"op": "drain_on_exit", "drain": False})
            return
        backlog = client.result(mountpoint, {"op": "backlog"})
        if not backlog.get("drain_on_exit") or not backlog.get("files"):
            return
        timeout = (
            parse_seconds(args.drain_timeout)
            if args.drain_timeout
            else float(backlog.get("drain_timeout", 600))
        )
        result = flush.flush(mountpoint, timeout, progress=not args.quiet)
        if not result["drained"]:
            print(
                f"cloudfs: {result['files']} files not uploaded yet: they stay in the journal "
                "and the next mount of this volume uploads them",
                file=sys.stderr,
            )
            client.result(mountpoint, {"op": "drain_on_exit", "drain": False})
    except (StartupError, FsError) as exc:  # an old or hung mount process: unmount anyway
        print(f"cloudfs: not drained: {exc}", file=sys.stderr)
