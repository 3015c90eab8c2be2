"""``cloudfs stats TARGET``: a live view of a mount's throughput, cache and latencies.

For a mount (``TARGET`` a path in it) the numbers come from the mount process
over its control socket (``{"op": "metrics"}``: its Prometheus registry as
text, and a few facts), so no ``--metrics`` address is needed. Processes
without a mount (``cloudfs gateway s3``, a ``cloudfs://`` user started with
``metrics_address``, ``cloudfs cache serve``) are named by their ``--metrics``
address (``http://HOST:PORT`` or ``HOST:PORT``) and shown the same way, without
the FUSE rows. Every ``--interval`` seconds the view shows the
rates since the previous refresh next to the totals since mount; it redraws in
place on a terminal and prints one block per refresh otherwise. ``--json``
prints one snapshot of the since-mount numbers for scripts.

``--scheduler`` (instead of ``TARGET``) shows the embedded job scheduler of
``--state-dir`` the same way: each group's queue and quota use, then every
job not finished yet with its state, data readiness, time queued, running
and stalled on data, and why it waits (``stats_scheduler.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from cloudfs.cli import stats_scheduler
from cloudfs.cli.stats_json import snapshot_json
from cloudfs.cli.stats_model import Interval
from cloudfs.cli.stats_source import fetch, is_endpoint
from cloudfs.cli.stats_view import render
from cloudfs.control import client
from cloudfs.errors import UsageError
from cloudfs.jobs.client import default_state_dir
from cloudfs.sizes import parse_seconds

HOME = "\x1b[H"
CLEAR_SCREEN = "\x1b[2J"
CLEAR_LINE = "\x1b[K"
CLEAR_BELOW = "\x1b[J"


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "stats", help="a mount's (or gateway's) throughput, cache, latencies; or the job queues",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    p.add_argument(
        "target",
        metavar="TARGET",
        nargs="?",
        help="a CloudFS mount (or a path in one), or the http://HOST:PORT of a --metrics",
    )
    p.add_argument(
        "--scheduler", action="store_true", help="show the job scheduler's queues and jobs"
    )
    p.add_argument(
        "--state-dir", type=Path, metavar="DIR", help="with --scheduler: the scheduler's directory"
    )
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
    if args.scheduler and args.target is not None:
        raise UsageError("give either TARGET or --scheduler, not both")
    if args.state_dir is not None and not args.scheduler:
        raise UsageError("--state-dir goes with --scheduler")
    if not args.scheduler and args.target is None:
        raise UsageError("give a TARGET (a mount or a --metrics address) or --scheduler")
    try:
        if args.scheduler:
            _run_scheduler(args.state_dir or default_state_dir(), args, interval)
            return 0
        target = args.target if is_endpoint(args.target) else client.mountpoint_of(args.target)
        if args.json:
            print(json.dumps(snapshot_json(fetch(target)), indent=2, sort_keys=True))
        else:
            live(target, interval, args.count, sys.stdout)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:  # `cloudfs stats MNT | head`
        _silence_stdout()
        return 0
    return 0


def _run_scheduler(state_dir: Path, args: argparse.Namespace, interval: float) -> None:
    snap = stats_scheduler.fetch(state_dir)  # fails at once when no scheduler runs
    if args.json:
        print(json.dumps(snap, indent=2, sort_keys=True))
        return
    first = [snap]

    def frame() -> list[str]:
        current = first.pop() if first else stats_scheduler.fetch(state_dir)
        return stats_scheduler.render(current)

    if sys.stdout.isatty():
        sys.stdout.write(HOME + CLEAR_SCREEN)
    refresh(frame, interval, args.count, sys.stdout, wait_first=False)


def live(target: str, interval: float, count: int | None, out: TextIO) -> None:
    """Refresh every ``interval`` s until ``count`` refreshes were shown (or forever)."""
    if out.isatty():
        out.write(HOME + CLEAR_SCREEN + f"cloudfs stats {target}: first sample ...\n")
        out.flush()
    previous = fetch(target)

    def frame() -> list[str]:
        nonlocal previous
        current = fetch(target)
        lines = render(current, Interval.between(previous, current))
        previous = current
        return lines

    refresh(frame, interval, count, out)


def refresh(
    frame: Callable[[], list[str]], interval: float, count: int | None, out: TextIO,
    *, wait_first: bool = True,
) -> None:  # fmt: skip
    """Show ``frame()`` every ``interval`` s (the first at once unless ``wait_first``),
    redrawn in place on a terminal, until ``count`` were shown (or forever)."""
    tty = out.isatty()
    deadline = time.monotonic() - (0.0 if wait_first else interval)
    shown = 0
    while count is None or shown < count:
        deadline += interval
        time.sleep(max(0.0, deadline - time.monotonic()))
        lines = frame()
        if tty:
            size = shutil.get_terminal_size()
            shown_lines = lines[: max(size.lines - 1, 1)]  # a scroll would break the redraw
            body = "".join(line[: size.columns] + CLEAR_LINE + "\n" for line in shown_lines)
            out.write(HOME + body + CLEAR_BELOW)
        else:
            out.write(("\n" if shown else "") + "\n".join(lines) + "\n")
        out.flush()
        shown += 1
        if time.monotonic() > deadline + interval:  # fell behind (slow mount): no catching up
            deadline = time.monotonic()


def _silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
