"""``python -m cloudfs.jobs.shim DIR RANK -- COMMAND...``: one worker, watched.

Started by the runner in a session of its own. It writes ``DIR/worker-RANK.pid``
(its pid and start time) before starting the command and
``DIR/worker-RANK.exit`` (the exit status, or minus the signal) when the
command ends, so a scheduler that restarted meanwhile, and is not its parent,
still learns how the worker ended. It ignores SIGTERM and SIGINT itself: the
runner signals the whole tree, and the shim stays to record the outcome.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from cloudfs.jobs.procs import start_time


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m cloudfs.jobs.shim DIR RANK -- COMMAND...", file=sys.stderr)
        return 2
    directory, rank, command = Path(argv[0]), argv[1], argv[3:]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _write(directory / f"worker-{rank}.pid", f"{os.getpid()} {start_time(os.getpid())}\n")
    try:
        child = subprocess.Popen(
            command, restore_signals=True, preexec_fn=_default_signals, close_fds=True
        )
    except OSError as e:
        print(f"cloudfs: cannot start {command[0]}: {e.strerror}", file=sys.stderr, flush=True)
        _write(directory / f"worker-{rank}.exit", "127\n")
        return 127
    status = child.wait()
    _write(directory / f"worker-{rank}.exit", f"{status}\n")
    return 0


def _default_signals() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
