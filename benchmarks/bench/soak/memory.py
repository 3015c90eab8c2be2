"""RSS and open file descriptors of the mount processes over time, from /proc, and
whether they stayed flat.

Flat: after the warm-up, the median of the last third of the samples is within
``RSS_GROWTH`` (20%) plus ``RSS_SLACK_MIB`` of the first third's median, and the open
descriptors within ``FD_GROWTH`` plus ``FD_SLACK``.
"""

from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

RSS_GROWTH = 0.20
RSS_SLACK_MIB = 32.0
FD_GROWTH = 0.20
FD_SLACK = 16


@dataclass(frozen=True)
class Sample:
    t: float
    rss_mib: float
    fds: int


def sample(pid: int, t: float) -> Sample | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration, ValueError):
        return None
    return Sample(t, rss_kib / 1024, fds)


@dataclass
class Sampler:
    """Every ``interval`` seconds, one sample of each named process until ``stop``."""

    pids: dict[str, int]
    interval: float
    now: Callable[[], float]
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        while True:
            for name, pid in self.pids.items():
                s = sample(pid, self.now())
                if s is not None:
                    self.samples.setdefault(name, []).append(s)
            if self._stop.wait(self.interval):
                return


def flatness(samples: list[Sample], after: float) -> dict[str, Any]:
    """The verdict for one process's samples taken after ``after`` seconds."""
    kept = [s for s in samples if s.t >= after]
    if len(kept) < 6:
        return {"flat": False, "why": f"only {len(kept)} samples after the warm-up"}
    third = len(kept) // 3
    first, last = kept[:third], kept[-third:]
    rss0 = statistics.median(s.rss_mib for s in first)
    rss1 = statistics.median(s.rss_mib for s in last)
    fd0 = statistics.median(s.fds for s in first)
    fd1 = statistics.median(s.fds for s in last)
    rss_ok = rss1 <= rss0 * (1 + RSS_GROWTH) + RSS_SLACK_MIB
    fd_ok = fd1 <= fd0 * (1 + FD_GROWTH) + FD_SLACK
    return {
        "flat": rss_ok and fd_ok,
        "rss_first_third_mib": round(rss0, 1),
        "rss_last_third_mib": round(rss1, 1),
        "rss_growth_pct": round(100 * (rss1 - rss0) / rss0, 1) if rss0 else None,
        "rss_max_mib": round(max(s.rss_mib for s in kept), 1),
        "fds_first_third": fd0,
        "fds_last_third": fd1,
        "fds_max": max(s.fds for s in kept),
        "rss_flat": rss_ok,
        "fds_flat": fd_ok,
        "rule": f"last third's median <= first third's x{1 + RSS_GROWTH:g} + {RSS_SLACK_MIB:g}"
        f" MiB (fds x{1 + FD_GROWTH:g} + {FD_SLACK})",
    }
