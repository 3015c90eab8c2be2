"""Cold passes for the cold-cost table (issue 26): one fresh mount per pass, what it costs.

Each pass: a fresh mount with an empty cache directory (``System.mounted``), ``sync; echo 3
> /proc/sys/vm/drop_caches``, then one read pass in a child process (bench.workloads):

- ``large``: the large files one after the other by 1 reader, 1 MiB unbuffered read() calls;
- ``small``: every small file by 8 threads (open, read all, close; the paths are known, no
  listing first).

Around the pass the FUSE daemon's CPU (and the origin server's, when it is a local process)
is read from /proc; the daemon's peak RSS (VmHWM) is read just before it is unmounted.

py-spy takes CPU from the same (2) cores, so the timed passes run without it; for Python
daemons (CloudFS) one more pass of each kind per repeat is sampled with py-spy ``--gil``
(``spy="extra"``, the default) and gives GIL-held time and its share of the daemon's CPU in
that same pass. ``spy="timed"`` samples the timed passes themselves, ``"off"`` never.

The origin is pluggable (``bench.origins``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.coldcost_probe import Spy, machine_busy_s, tree_cpu
from bench.dataset import DatasetSpec
from bench.host import drop_caches
from bench.systems import CloudFS, Mount, MountError, System
from bench.workloads import PassFailed, run_pass

Log = Callable[[str], None]
KINDS = ("large", "small")
SPY_MODES = ("extra", "timed", "off")


class ColdCostRun:
    """Runs the cold passes of every system and collects one record per pass."""

    def __init__(
        self,
        spec: DatasetSpec,
        origin_pid: int | None,
        spy_mode: str,
        spy_rate: int,
        spy_dir: Path,
        timeout: float,
        log: Log,
        cloudfs_options: dict[str, str] | None = None,
    ) -> None:
        self.spec = spec
        self.cloudfs_options = cloudfs_options or {}  # more `cloudfs mount` options
        self.origin_pid = origin_pid
        self.spy_mode = spy_mode
        self.spy_rate = spy_rate
        self.spy_dir = spy_dir
        self.timeout = timeout
        self.log = log
        self.records: list[dict[str, Any]] = []

    def repeat(self, systems: list[System], number: int) -> None:
        """One repeat: every system, starting one further along the list each repeat so
        that drifting load from other work on the box falls on every system alike."""
        shift = number % len(systems)
        for system in systems[shift:] + systems[:shift]:
            python = isinstance(system, CloudFS)
            for kind in KINDS:
                sampled = python and self.spy_mode == "timed"
                self.records.append(self.one_pass(system, kind, number, timed=True, spy=sampled))
            if python and self.spy_mode == "extra":
                for kind in KINDS:
                    self.records.append(self.one_pass(system, kind, number, timed=False, spy=True))

    def paths(self, mount: Mount, kind: str) -> list[str]:
        keys = self.spec.large_keys() if kind == "large" else self.spec.small_keys()
        return [str(mount.root / key) for key in keys]

    def expected_bytes(self, kind: str) -> int:
        if kind == "large":
            return self.spec.large_bytes
        return self.spec.small_count * self.spec.small_size

    def one_pass(
        self, system: System, kind: str, number: int, timed: bool, spy: bool
    ) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "system": system.name, "kind": kind, "repeat": number, "timed": timed,
            "sampled": spy, "error": None,
        }  # fmt: skip
        mount: Mount | None = None
        try:
            options = self.cloudfs_options if isinstance(system, CloudFS) else {}
            with system.mounted(**options) as mount:
                self.measure(mount, kind, rec, spy)
        except (PassFailed, MountError, OSError, RuntimeError) as e:
            rec["error"] = f"{type(e).__name__}: {e}"
        if mount is not None:
            rec["peak_mib"] = mount.peak_mib
            rec["notes"] = mount.notes
        tag = "sampled" if spy else "timed"
        if rec["error"]:
            self.log(f"  {system.name} {kind} ({tag}) FAILED: {rec['error']}")
        else:
            rate = f"{rec['mib_s']:.0f} MiB/s" if kind == "large" else f"{rec['files_s']:.0f} f/s"
            gil = f", GIL {rec['gil_s']:.2f} s" if rec.get("gil_s") is not None else ""
            self.log(
                f"  {system.name} {kind} ({tag}): {rate}, daemon CPU {rec['cpu_s']:.2f} s{gil}, "
                f"peak {rec['peak_mib'] or 0:.0f} MiB"
            )
        return rec

    def measure(self, mount: Mount, kind: str, rec: dict[str, Any], spy: bool) -> None:
        assert mount.proc is not None, "a FUSE system has a daemon process"
        pid = mount.proc.pid
        spec = {
            "kind": "read",
            "paths": self.paths(mount, kind),
            "readers": 1 if kind == "large" else 8,
        }
        drop_caches()
        sampler = None
        if spy:
            raw = self.spy_dir / f"{rec['system']}-{kind}-{rec['repeat']}.raw"
            sampler = Spy(pid, raw, self.spy_rate)
            rec["spy_raw"] = str(raw)
        cpu0, origin0, busy0 = tree_cpu(pid), self.origin_cpu(), machine_busy_s()
        t0 = time.perf_counter()
        try:
            out = run_pass(spec, self.timeout, on_timeout=mount.abort)
        finally:
            wall = time.perf_counter() - t0
            cpu1, origin1, busy1 = tree_cpu(pid), self.origin_cpu(), machine_busy_s()
            spied = sampler.stop() if sampler is not None else None
        rec.update({k: out[k] for k in ("files", "bytes", "seconds", "mib_s", "files_s")})
        rec["pass_wall_s"] = wall  # the child's start-up included: the window CPU was read in
        cpu = cpu1 - cpu0
        rec.update(cpu_s=cpu.total_s, cpu_user_s=cpu.user_s, cpu_sys_s=cpu.sys_s, minflt=cpu.minflt)
        rec["machine_busy_s"] = busy1 - busy0  # every process's, ours and others'
        if origin0 is not None and origin1 is not None:
            rec["origin_cpu_s"] = origin1 - origin0
        if spied is not None:
            rec.update(spied.as_dict())
        if out["bytes"] != self.expected_bytes(kind):
            raise PassFailed(f"read {out['bytes']} bytes of {self.expected_bytes(kind)}")

    def origin_cpu(self) -> float | None:
        return None if self.origin_pid is None else tree_cpu(self.origin_pid).total_s
