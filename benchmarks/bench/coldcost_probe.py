"""What a cold pass costs the FUSE daemon: CPU from /proc and GIL-held time from py-spy.

CPU is read from ``/proc/PID/stat`` (utime + stime + cutime + cstime of the daemon and every
live descendant) before and after a pass, so it is the daemon's own work, not the reader's.

GIL-held time: ``py-spy record --pid PID --rate R --gil --nonblocking --format raw`` runs for
the pass and is stopped with SIGINT (it writes its file then). With ``--gil`` py-spy keeps
only the stack of the thread holding the GIL, so the sum of the raw file's counts divided by
the rate is the seconds some thread of the daemon held the GIL. py-spy's own "Samples: N"
counts only the samples it kept (here: GIL-held ones), so it cannot tell when py-spy fell
behind the rate on busy cores; then counts / rate understates. ``check_gil`` measures that
on known cases (a process busy-looping for 1 s, one sleeping for 1 s), in the same run, so
the report can say how far to trust the daemon's figures.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.systems import descendants

SPY_START_TIMEOUT_S = 20.0
SPY_STOP_TIMEOUT_S = 30.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Cpu:
    """CPU counters of a process tree: user and system seconds, minor page faults."""

    user_s: float
    sys_s: float
    minflt: int

    def __sub__(self, other: Cpu) -> Cpu:
        return Cpu(self.user_s - other.user_s, self.sys_s - other.sys_s, self.minflt - other.minflt)

    @property
    def total_s(self) -> float:
        return self.user_s + self.sys_s


def tree_cpu(pid: int) -> Cpu:
    """CPU of ``pid`` and its live descendants, reaped children included. The user/system
    split and the page faults say where a daemon's time goes when it is not its own code
    (copies in the kernel, zero-filling fresh memory)."""
    user = system = faults = 0
    for p in [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone between the listing and the read
        faults += int(fields[7]) + int(fields[8])  # minflt cminflt
        user += int(fields[11]) + int(fields[13])  # utime cutime
        system += int(fields[12]) + int(fields[14])  # stime cstime
    return Cpu(user / CLK_TCK, system / CLK_TCK, faults)


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent not idle (/proc/stat): with the daemon's, the
    origin's and the reader's, it shows how much other work shared the cores in a pass."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
    return (sum(ticks) - ticks[3] - ticks[4]) / CLK_TCK


@dataclass
class SpyResult:
    gil_s: float  # GIL-held samples / rate
    gil_samples: int
    wall_s: float  # how long py-spy was attached

    def as_dict(self) -> dict[str, Any]:
        return {"gil_s": self.gil_s, "gil_samples": self.gil_samples, "spy_wall_s": self.wall_s}


class Spy:
    """py-spy attached to ``pid`` (and its Python subprocesses) from ``__init__`` to ``stop``."""

    def __init__(self, pid: int, out: Path, rate: int) -> None:
        self.out = out
        self.rate = rate
        self.lines: list[str] = []
        argv = ["py-spy", "record", "--pid", str(pid), "--rate", str(rate), "--gil"]
        argv += ["--nonblocking", "--subprocesses", "--format", "raw", "-o", str(out)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        started = threading.Event()
        self.reader = threading.Thread(target=self._watch, args=(started,), daemon=True)
        self.reader.start()
        if not started.wait(SPY_START_TIMEOUT_S):
            self._kill()
            raise RuntimeError(f"py-spy did not start sampling: {' | '.join(self.lines[-3:])}")
        self.start = time.perf_counter()

    def _watch(self, started: threading.Event) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # py-spy says "Sampling process ..." once it samples
            self.lines.append(line.strip())
            if "Sampling process" in line:
                started.set()

    def _kill(self) -> None:
        self.proc.kill()
        self.proc.wait(SPY_STOP_TIMEOUT_S)

    def stop(self) -> SpyResult:
        wall = time.perf_counter() - self.start
        self.proc.send_signal(signal.SIGINT)  # py-spy writes the raw file on SIGINT
        try:
            self.proc.wait(SPY_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill()
            raise RuntimeError("py-spy did not stop after SIGINT") from None
        self.reader.join(SPY_STOP_TIMEOUT_S)
        samples = 0
        if self.out.exists():
            for line in self.out.read_text().splitlines():
                count = line.rpartition(" ")[2]
                samples += int(count) if count.isdigit() else 0
        return SpyResult(samples / self.rate, samples, wall)


# --- proving the measure on known cases ---------------------------------------------

_CHILD = """
import sys, time
for line in sys.stdin:
    if line.strip() == "busy":
        end = time.perf_counter() + 1.0
        while time.perf_counter() < end:
            pass
    elif line.strip() == "sleep":
        time.sleep(1.0)
    print("done", flush=True)
"""


def check_gil(workdir: Path, rate: int) -> list[dict[str, Any]]:
    """GIL-held seconds py-spy reports for a Python process busy for 1 s (expect ~1) and
    sleeping for 1 s (expect ~0), measured exactly as a daemon's pass is."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    out: list[dict[str, Any]] = []
    try:
        for case, expected in (("busy", 1.0), ("sleep", 0.0)):
            spy = Spy(child.pid, workdir / f"gil-check-{case}.raw", rate)
            child.stdin.write(case + "\n")
            child.stdin.flush()
            if child.stdout.readline().strip() != "done":
                raise RuntimeError(f"GIL check child died in the {case} case")
            result = spy.stop()
            out.append({"case": f"{case} 1 s", "expected_gil_s": expected, **result.as_dict()})
    finally:
        child.kill()
        child.wait(10)
    return out
