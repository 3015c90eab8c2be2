"""The machine's own capacity: GPUs, CPUs and memory that all jobs together may take.

``scheduler.yaml`` may declare it (``machine: {gpus: 4, cpus: 32, memory: 256G}``);
what it leaves out is found here: GPUs from ``nvidia-smi -L`` (one line per GPU),
else the ``/dev/nvidiaN`` device files, else none; CPUs from ``os.cpu_count()``;
memory from the physical pages (``os.sysconf``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

MACHINE_RESOURCES = ("gpus", "cpus", "memory")
_DEVICE = re.compile(r"nvidia[0-9]+")


@dataclass(frozen=True, slots=True)
class Machine:
    """Capacity per resource; ``None``: not declared (no limit until ``detect`` fills it)."""

    gpus: int | None = None
    cpus: float | None = None
    memory: float | None = None

    def limit(self, resource: str) -> float | None:
        value: float | None = getattr(self, resource, None)
        return value

    def as_dict(self) -> dict[str, float | None]:
        return {r: self.limit(r) for r in MACHINE_RESOURCES}


def fill(declared: Machine, found: Machine) -> Machine:
    """``declared``, with what it leaves out taken from ``found``."""
    return replace(
        declared,
        gpus=found.gpus if declared.gpus is None else declared.gpus,
        cpus=found.cpus if declared.cpus is None else declared.cpus,
        memory=found.memory if declared.memory is None else declared.memory,
    )


def detect(timeout: float = 5.0) -> Machine:
    """This machine's GPUs, CPUs and physical memory."""
    return Machine(gpus=count_gpus(timeout), cpus=float(os.cpu_count() or 1),
                   memory=float(_physical_memory()))  # fmt: skip


def count_gpus(timeout: float = 5.0, dev: Path = Path("/dev")) -> int:
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=timeout)
            if done.returncode == 0:
                return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        return sum(1 for p in dev.iterdir() if _DEVICE.fullmatch(p.name))
    except OSError:
        return 0


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return 0
