"""The machine: dropping the kernel's caches, and what to say about it in the report."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def drop_caches() -> None:
    """``sync; echo 3 > /proc/sys/vm/drop_caches`` (needs root; checked once at start-up)."""
    os.sync()
    DROP_CACHES.write_text("3\n")


def can_drop_caches() -> bool:
    try:
        drop_caches()
    except OSError:
        return False
    return True


def machine_info(repo_root: Path) -> dict[str, Any]:
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "kernel": platform.release(),
        "cpu": cpu,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cloudfs_commit": _git(repo_root, "rev-parse", "--short", "HEAD"),
        "cloudfs_tree_dirty": bool(_git(repo_root, "status", "--porcelain", "--", "cloudfs")),
    }


def _git(repo_root: Path, *args: str) -> str:
    """Read-only git queries (rev-parse, status) for the report."""
    try:
        out = subprocess.run(
            ["git", "-C", str(repo_root), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return ""
    return out.stdout.strip()
