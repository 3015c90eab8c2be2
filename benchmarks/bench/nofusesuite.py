"""One repeat of one system in ``benchmarks/without_fuse.py``: every pass, cold then warm.

For each pass (``bench.nofusespec.PASSES``) the system is made fresh (new mount, gateway or
client process, empty caches); the kernel's caches are dropped and the proxy's counts
zeroed; the cold pass reads every file of the phase; the counts are taken and zeroed again;
the warm pass reads them all again on the same system. For the ``cloudfs://`` systems a
third pass reads them from a new client process on the same (warm) mount or tree service:
what a second training process or a forked worker sees. Each file's size and crc32 is
checked against what was written.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from bench.host import drop_caches
from bench.nofuserunner import Runner
from bench.nofusespec import PASSES, NoFuseSpec, Pass
from bench.nofusesystems import NoFuseSystem
from bench.systems import MountError
from bench.workloads import PassFailed
from testkit.faults_proxy import FaultsProxy

Log = Callable[[str], None]
MiB = 1 << 20
TEMPERATURES = ("cold", "warm")
NEW_PROCESS = "new-process"  # a new client process on the warm system (no caches dropped)


def measure_system(
    system: NoFuseSystem,
    spec: NoFuseSpec,
    proxy: FaultsProxy,
    crcs: dict[str, int],
    log: Log,
) -> dict[str, Any]:
    """{"passes": {pass: {"cold": {...}, "warm": {...}}}, "errors": [...]} of one system."""
    out: dict[str, Any] = {"passes": {}, "errors": []}
    for p in PASSES:
        try:
            with system.fresh() as runner:
                got = {t: _one(runner, p, t, spec, proxy, crcs) for t in TEMPERATURES}
                if system.new_process:
                    runner.respawn()
                    got[NEW_PROCESS] = _one(runner, p, NEW_PROCESS, spec, proxy, crcs)
                out["passes"][p.name] = got
        except (PassFailed, MountError, OSError, RuntimeError, ValueError) as e:
            out["errors"].append(f"{p.name}: {type(e).__name__}: {e}")
            log(f"    {p.name}: ERROR {type(e).__name__}: {e}")
            continue
        got = out["passes"][p.name]
        rate = "mib_s" if p.phase == "large" else "files_s"
        unit = "MiB/s" if p.phase == "large" else "files/s"
        log(
            f"    {p.name}: cold {got['cold'][rate]:,.0f} {unit} (origin "
            f"{got['cold']['origin_multiple']:.2f}x), warm {got['warm'][rate]:,.0f} "
            f"(origin {got['warm']['origin_multiple']:.2f}x), wrong "
            f"{got['cold']['wrong_files'] + got['warm']['wrong_files']}"
            + (
                f"; new process {got[NEW_PROCESS][rate]:,.0f} (origin "
                f"{got[NEW_PROCESS]['origin_multiple']:.2f}x)"
                if NEW_PROCESS in got
                else ""
            )
        )
    return out


def _one(
    runner: Runner,
    p: Pass,
    temperature: str,
    spec: NoFuseSpec,
    proxy: FaultsProxy,
    crcs: dict[str, int],
) -> dict[str, Any]:
    keys = spec.keys(p.phase)
    if temperature == "cold":
        drop_caches()
    proxy.reset_counts()
    load = os.getloadavg()[0]
    start = time.perf_counter()
    got = runner.read(keys, p.readers, p.stream)
    wall = time.perf_counter() - start
    size = spec.size(p.phase)
    wrong = sum(1 for k, c in zip(keys, got["crcs"], strict=True) if crcs[k] != c)
    if got["bytes"] != size * len(keys):
        wrong = max(wrong, 1)
    data = spec.phase_bytes(p.phase)
    origin = proxy.response_bytes()
    return {
        "files": got["files"],
        "bytes": got["bytes"],
        "seconds": float(got["seconds"]),
        "wall_seconds": wall,  # with the child's start-up for file passes
        "mib_s": float(got["mib_s"]),
        "files_s": float(got["files_s"]),
        "origin_bytes": origin,
        "origin_get_bytes": proxy.response_bytes("GET"),
        "origin_requests": dict(proxy.counts()),
        "origin_multiple": origin / data,
        "wrong_files": wrong,
        "load_1min": load,
    }
