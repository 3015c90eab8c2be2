"""``cloudfs scheduler serve``: the embedded job scheduler (one machine).

Usually started by ``cloudfs job submit`` when none runs. It keeps its state
(LMDB), the jobs' logs and the caches of the volumes it mounts in
``--state-dir`` (``$CLOUDFS_SCHEDULER_DIR``, else /var/lib/cloudfs/scheduler for
root, ~/.local/state/cloudfs/scheduler otherwise), and reads groups and quotas
from ``--config`` (default ``STATE_DIR/scheduler.yaml``; re-read when it
changes). Stopping it leaves running jobs running; the next one re-adopts them.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from cloudfs.errors import StartupError
from cloudfs.jobs.client import default_state_dir
from cloudfs.jobs.scheduler import Scheduler
from cloudfs.jobs.server import SchedulerServer, socket_path

TICK = 0.5  # seconds between two passes of the loop


def add_parser(commands: Any) -> Any:
    """Add ``cloudfs scheduler`` with ``serve``; return its subparsers, to which
    ``cli/main.py`` adds the Kubernetes subcommands (``scheduler_extender.py``,
    ``scheduler_admission.py``)."""
    p: argparse.ArgumentParser = commands.add_parser(
        "scheduler",
        help="the job scheduler, and scheduling on Kubernetes",
        description="serve: the embedded job scheduler (docs/jobs.md); extender and "
        "admission-check: placement and data readiness on Kubernetes "
        "(docs/kubernetes-scheduling.md)",
    )
    sub = p.add_subparsers(dest="scheduler_command", required=True, metavar="SUBCOMMAND")
    add_serve(sub)
    return sub


def add_serve(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "serve", help="run the embedded scheduler in the foreground", description=__doc__
    )
    add_location_flags(p)
    p.set_defaults(run=run_serve)


def add_location_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", type=Path, default=None, help="the scheduler's directory")
    p.add_argument("--config", type=Path, default=None, help="groups and quotas (YAML)")


def state_and_config(args: argparse.Namespace) -> tuple[Path, Path]:
    state = args.state_dir or default_state_dir()
    return state, args.config or state / "scheduler.yaml"


def run_serve(args: argparse.Namespace) -> int:
    state, config = state_and_config(args)
    state.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    lock = open(state / "scheduler.lock", "w")  # noqa: SIM115 (held for the process's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise StartupError(f"a scheduler already runs for {state}") from None
    scheduler = Scheduler(state, config)
    scheduler.recover()
    server = SchedulerServer(socket_path(state), scheduler)
    stop = threading.Event()

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    threading.Thread(target=server.serve_forever, name="api", daemon=True).start()
    logging.info("scheduler serving %s", socket_path(state))
    try:
        while not stop.is_set():
            scheduler.tick()
            stop.wait(TICK)
    finally:
        server.shutdown()
        server.server_close()
        socket_path(state).unlink(missing_ok=True)
        scheduler.store.close()
        lock.close()
    return 0
