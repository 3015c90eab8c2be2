"""``cloudfs umount MOUNTPOINT``: unmount and wait for the mount process to finish."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from typing import Any

from cloudfs.cli import runtime
from cloudfs.cli.checks import is_mounted
from cloudfs.cli.sizes import parse_seconds
from cloudfs.errors import StartupError, UsageError


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "umount", aliases=["unmount"], help="unmount a CloudFS mount"
    )
    p.add_argument("mountpoint")
    p.add_argument("-z", "--lazy", action="store_true", help="detach now, clean up when unused")
    p.add_argument(
        "--timeout", default="60", help="seconds to wait for the mount process to exit (60)"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    timeout = parse_seconds(args.timeout)
    if not is_mounted(args.mountpoint):
        raise UsageError(f"{args.mountpoint} is not mounted")
    pid = runtime.read_pid(os.path.realpath(args.mountpoint))
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
