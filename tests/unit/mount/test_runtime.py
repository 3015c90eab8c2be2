"""runtime.wait_for_exit: a process that exited counts as gone even before it is reaped."""

from __future__ import annotations

import subprocess
import sys
import time

from cloudfs.mount import runtime


def test_a_zombie_counts_as_exited() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    time.sleep(0.5)  # it has exited; nobody has reaped it yet
    try:
        started = time.monotonic()
        assert runtime.wait_for_exit(proc.pid, timeout=10)
        assert time.monotonic() - started < 2
    finally:
        proc.wait()


def test_a_running_process_is_waited_for() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not runtime.wait_for_exit(proc.pid, timeout=0.3)
    finally:
        proc.kill()
        proc.wait()
