"""A running mount's pid, so ``cloudfs umount`` can wait for it; the default cache root.

Where the pid file and the control socket live is ``cloudfs.control.paths``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from cloudfs.control.paths import pid_file


def write_pid(mountpoint: str) -> Path:
    path = pid_file(mountpoint)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{os.getpid()}\n")
    return path


def read_pid(mountpoint: str) -> int | None:
    try:
        return int(pid_file(mountpoint).read_text().strip())
    except (OSError, ValueError):
        return None


def wait_for_exit(pid: int, timeout: float) -> bool:
    """Wait until process ``pid`` is gone; False if it is still there after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs: a zombie (exited, not yet reaped by its parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")


def default_cache_root() -> Path:
    if os.geteuid() == 0:
        return Path("/var/cache/cloudfs")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "cloudfs"
