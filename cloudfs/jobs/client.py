"""The CLI side of the scheduler's socket, and starting the scheduler on demand.

``request(state_dir, message, start=True)`` sends one request; if no scheduler
answers and ``start`` is set, it starts ``cloudfs scheduler serve`` for that
state directory in the background (its own session, output to
``STATE_DIR/scheduler.log``) and waits for its socket.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from cloudfs.errors import StartupError
from cloudfs.jobs.server import socket_path
from cloudfs.lib.jsonlines import JsonLinesClient, Message

START_TIMEOUT = 20.0


class NoScheduler(StartupError):
    """Nothing answers on the state directory's socket (and none was to be started)."""


def default_state_dir() -> Path:
    env = os.environ.get("CLOUDFS_SCHEDULER_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/lib/cloudfs/scheduler")
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "cloudfs" / "scheduler"


def request(
    state_dir: Path, message: Message, *, start: bool = False, config: Path | None = None,
    timeout: float = 30.0,
) -> Message:  # fmt: skip
    """The scheduler's answer to ``message``; ``FsError`` with its errno if it refused."""
    try:
        return _call(state_dir, message, timeout)
    except (FileNotFoundError, ConnectionRefusedError):
        if not start:
            raise NoScheduler(
                f"no scheduler runs for {state_dir} (`cloudfs job submit` starts one)"
            ) from None
    start_server(state_dir, config)
    return _call(state_dir, message, timeout)


def start_server(state_dir: Path, config: Path | None) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "cloudfs.cli.main", "scheduler", "serve",
               "--state-dir", str(state_dir)]  # fmt: skip
    if config is not None:
        command += ["--config", str(config)]
    with open(state_dir / "scheduler.log", "ab") as log:
        child = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            _call(state_dir, {"op": "ping"}, 2.0)
            return
        except (FileNotFoundError, ConnectionRefusedError):
            pass
        if child.poll() not in (None, 0):  # 0: another scheduler won the race; wait for it
            break
        time.sleep(0.1)
    raise StartupError(f"the scheduler did not start; see {state_dir / 'scheduler.log'}")


def _call(state_dir: Path, message: Message, timeout: float) -> Message:
    """One request and its answer; ``FileNotFoundError``/``ConnectionRefusedError``
    where no scheduler listens."""
    with JsonLinesClient(socket_path(state_dir), timeout=timeout, peer="the scheduler") as channel:
        channel.send(message)
        return channel.reply()
