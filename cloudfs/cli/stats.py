"""``cloudfs stats MOUNTPOINT``: a live view of a mount's throughput, cache and latencies.

The numbers come from the mount process over its control socket
(``{"op": "metrics"}``: its Prometheus registry as text, and a few facts), so no
``--metrics`` address is needed. Every ``--interval`` seconds the view shows the
rates since the previous refresh next to the totals since mount; it redraws in
place on a terminal and prints one block per refresh otherwise. ``--json``
prints one snapshot of the since-mount numbers for scripts.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from typing import Any, TextIO

from cloudfs.cli.sizes import parse_seconds
from cloudfs.cli.stats_view import Interval, Snapshot, parse_snapshot, render, snapshot_json
from cloudfs.control import client
from cloudfs.errors import StartupError, UsageError

TIMEOUT = 10.0  # seconds to wait for the mount's answer

HOME = "\x1b[H"
CLEAR_SCREEN = "\x1b[2J"
CLEAR_LINE = "\x1b[K"
CLEAR_BELOW = "\x1b[J"


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "stats", help="show a mount's throughput, cache hit ratios and latencies",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    p.add_argument("mountpoint", metavar="MOUNTPOINT", help="a CloudFS mount (or a path in one)")
    p.add_argument("--json", action="store_true", help="print one snapshot as JSON and exit")
    p.add_argument("--interval", default="1", metavar="SECONDS", help="refresh period (1)")
    p.add_argument("--count", type=int, metavar="N", help="stop after N refreshes")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    interval = parse_seconds(args.interval)
    if not (interval > 0 and math.isfinite(interval)):
        raise UsageError("--interval must be more than 0 seconds")
    if args.count is not None and args.count < 1:
        raise UsageError("--count must be at least 1")
    mountpoint = client.mountpoint_of(args.mountpoint)
    try:
        if args.json:
            print(json.dumps(snapshot_json(fetch(mountpoint)), indent=2, sort_keys=True))
        else:
            live(mountpoint, interval, args.count, sys.stdout)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:  # `cloudfs stats MNT | head`
        _silence_stdout()
        return 0
    return 0


def fetch(mountpoint: str) -> Snapshot:
    """One snapshot of the mount's metrics (StartupError if it does not answer)."""
    answer = client.result(mountpoint, {"op": "metrics"}, timeout=TIMEOUT)
    text = answer.get("text")
    if not isinstance(text, str):
        raise StartupError(f"{mountpoint}: the mount answered without metrics")
    facts = {k: v for k, v in answer.items() if k not in ("text", "done")}
    return parse_snapshot(text, facts, time.monotonic())


def live(mountpoint: str, interval: float, count: int | None, out: TextIO) -> None:
    """Refresh every ``interval`` s until ``count`` refreshes were shown (or forever)."""
    tty = out.isatty()
    if tty:
        out.write(HOME + CLEAR_SCREEN + f"cloudfs stats {mountpoint}: first sample ...\n")
        out.flush()
    previous = fetch(mountpoint)
    deadline = time.monotonic()
    shown = 0
    while count is None or shown < count:
        deadline += interval
        time.sleep(max(0.0, deadline - time.monotonic()))
        current = fetch(mountpoint)
        lines = render(current, Interval.between(previous, current))
        if tty:
            size = shutil.get_terminal_size()
            shown_lines = lines[: max(size.lines - 1, 1)]  # a scroll would break the redraw
            body = "".join(line[: size.columns] + CLEAR_LINE + "\n" for line in shown_lines)
            out.write(HOME + body + CLEAR_BELOW)
        else:
            out.write(("\n" if shown else "") + "\n".join(lines) + "\n")
        out.flush()
        previous = current
        shown += 1
        if time.monotonic() > deadline + interval:  # fell behind (slow mount): no catching up
            deadline = time.monotonic()


def _silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
