"""The sequence of passes for one system.

Cold = a fresh mount with an empty cache directory after ``sync; echo 3 >
/proc/sys/vm/drop_caches``; warm = an immediate second pass on the same mount. Each
group of passes gets its own fresh mount, so no pass inherits another's cache:

- large files, 1 reader then (fresh mount) 4 readers: cold, warm, and warm after
  dropping the kernel's caches (what the FUSE process's own cache serves), MiB/s;
- list+stat of every small file, cold and warm, stat/s; then, warm, ``os.scandir`` of each
  small directory with ``entry.stat()`` per entry (``scandir_stat_warm``);
- read every small file, 1 then (fresh mount) 8 readers, cold and warm, files/s;
- a PyTorch DataLoader, epochs 1-3, ``num_workers`` 0 then (fresh mount) 4, s/epoch.

Result keys (``large_r1_cold`` ...) are the ones ``report`` tabulates. On CloudFS mounts the
FUSE requests each pass sent to the mount (``cloudfs_fuse_ops_total`` before and after) go to
the pass's raw entry as ``fuse_ops``, and what ``cloudfs stats --json`` said of each mount
(e.g. how opens go) to ``mount_facts``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench.dataset import DatasetSpec
from bench.eviction import scrape
from bench.host import drop_caches
from bench.systems import Mount, MountError, System
from bench.workloads import PassFailed, run_pass

Log = Callable[[str], None]
PHASES = (
    "large-r1", "large-r4", "stat", "small-r1", "small-r8", "dataloader-w0", "dataloader-w4",
)  # fmt: skip
FUSE_OPS = "cloudfs_fuse_ops_total{"


def fuse_ops(port: int | None) -> dict[str, float] | None:
    """``cloudfs_fuse_ops_total`` by op, from the mount's metrics endpoint (None: no endpoint)."""
    if port is None:
        return None
    try:
        samples = scrape(port)
    except OSError:
        return None
    out: dict[str, float] = {}
    for key, value in samples.items():
        if key.startswith(FUSE_OPS) and 'op="' in key:
            out[key.split('op="', 1)[1].split('"', 1)[0]] = value
    return out


class SystemRun:
    """Runs every pass for one system and collects results, raw pass output and errors."""

    def __init__(
        self,
        system: System,
        spec: DatasetSpec,
        timeout: float,
        log: Log,
        dataloader: bool = True,
        skip: frozenset[str] = frozenset(),
    ) -> None:
        self.system = system
        self.spec = spec
        self.timeout = timeout
        self.log = log
        self.dataloader = dataloader
        self.skip = skip  # phase names (PHASES) not run for this system
        self.results: dict[str, float | None] = {}
        self.raw: dict[str, Any] = {}
        self.errors: list[str] = []
        self.peaks: dict[str, float | None] = {}
        self.facts: dict[str, Any] = {}

    def run(self) -> dict[str, Any]:
        start = time.monotonic()
        for readers in (1, 4):
            self.phase(f"large-r{readers}", lambda m, r=readers: self.large(m, r))
        self.phase("stat", self.stat)
        for readers in (1, 8):
            self.phase(f"small-r{readers}", lambda m, r=readers: self.small(m, r))
        if self.dataloader:
            for workers in (0, 4):
                self.phase(f"dataloader-w{workers}", lambda m, w=workers: self.loader(m, w))
        known = [p for p in self.peaks.values() if p is not None]
        self.results["peak_mib"] = max(known) if known else None
        return {
            "results": self.results,
            "peak_mib_by_phase": self.peaks,
            "mount_facts": self.facts,
            "skipped_phases": sorted(self.skip),
            "raw": self.raw,
            "errors": self.errors,
            "seconds": time.monotonic() - start,
        }

    def phase(self, name: str, body: Callable[[Mount], None]) -> None:
        if name in self.skip:
            self.log(f"  {self.system.name}: {name} skipped (--skip)")
            return
        self.log(f"  {self.system.name}: {name}")
        mount: Mount | None = None
        try:
            with self.system.mounted() as mount:
                body(mount)
        except (PassFailed, MountError, OSError) as e:
            self.errors.append(f"{name}: {e}")
            self.log(f"  {self.system.name}: {name} FAILED: {e}")
        if mount is not None and mount.facts:
            self.facts[name] = mount.facts
        if mount is not None and self.system.is_fuse:
            self.peaks[name] = mount.peak_mib
            if mount.notes:
                self.errors.append(f"{name}: mount {', '.join(mount.notes)}")

    def measure(self, mount: Mount, key: str, spec: dict[str, Any], field: str) -> Any:
        limit = self.timeout * int(spec.get("epochs", 1))
        before = fuse_ops(mount.metrics_port)
        try:
            out = run_pass(spec, limit, on_timeout=mount.abort)
        except PassFailed:
            self.results[key] = None
            raise
        self.raw[key] = {k: v for k, v in out.items() if k != "paths"}
        after = fuse_ops(mount.metrics_port)
        if before is not None and after is not None:
            self.raw[key]["fuse_ops"] = {
                op: n - before.get(op, 0.0) for op, n in sorted(after.items())
                if n - before.get(op, 0.0) > 0
            }  # fmt: skip
        value = out[field]
        self.results[key] = value
        shown = ", ".join(f"{v:.1f}" for v in value) if isinstance(value, list) else f"{value:,.1f}"
        self.log(f"    {key}: {shown} {field}")
        return out

    # --- the passes -------------------------------------------------------------------

    def large(self, mount: Mount, readers: int) -> None:
        paths = [str(mount.root / key) for key in self.spec.large_keys()]
        spec = {"kind": "read", "paths": paths, "readers": readers}
        drop_caches()
        self.measure(mount, f"large_r{readers}_cold", spec, "mib_s")
        self.measure(mount, f"large_r{readers}_warm", spec, "mib_s")
        if self.system.is_fuse:
            drop_caches()
            self.measure(mount, f"large_r{readers}_dropped", spec, "mib_s")

    def stat(self, mount: Mount) -> None:
        dirs = [str(mount.root / d) for d in self.spec.small_dir_keys()]
        spec = {"kind": "liststat", "dirs": dirs}
        drop_caches()
        for state in ("cold", "warm"):
            out = self.measure(mount, f"stat_{state}", spec, "stat_s")
            self.results[f"liststat_{state}"] = out["liststat_s"]
            if out["files"] != self.spec.small_count:
                self.errors.append(
                    f"stat_{state}: listed {out['files']} files, expected {self.spec.small_count}"
                )
        spec = {"kind": "scandirstat", "dirs": dirs}
        out = self.measure(mount, "scandir_stat_warm", spec, "stat_s")
        if out["files"] != self.spec.small_count:
            self.errors.append(
                f"scandir_stat_warm: listed {out['files']} files, expected {self.spec.small_count}"
            )

    def small(self, mount: Mount, readers: int) -> None:
        paths = [str(mount.root / key) for key in self.spec.small_keys()]
        spec = {"kind": "read", "paths": paths, "readers": readers}
        drop_caches()
        for state in ("cold", "warm"):
            out = self.measure(mount, f"small_r{readers}_{state}", spec, "files_s")
            expected = self.spec.small_count * self.spec.small_size
            if out["bytes"] != expected:
                self.errors.append(f"small_r{readers}_{state}: read {out['bytes']} of {expected}")

    def loader(self, mount: Mount, workers: int) -> None:
        paths = [str(mount.root / key) for key in self.spec.small_keys()]
        spec = {
            "kind": "dataloader",
            "paths": paths,
            "workers": workers,
            "epochs": 3,
            "batch_size": 32,
        }
        drop_caches()
        out = self.measure(mount, f"dl_w{workers}", spec, "epoch_seconds")
        for epoch, seconds in enumerate(out["epoch_seconds"], start=1):
            self.results[f"dl_w{workers}_e{epoch}"] = seconds
        del self.results[f"dl_w{workers}"]
