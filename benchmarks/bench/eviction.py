"""CloudFS with a disk cache half the size of the data set: hit ratio per epoch, per policy.

One mount per policy (``--cache-size`` = half the large files, ``--memory-cache-size
64M``); three sequential epochs over the large files on that mount, the kernel's caches
dropped before each; the mount's Prometheus counters are read around each epoch.
With plain LRU a sequential scan of twice the cache evicts every block before it is read
again (0% disk hits from epoch 2 on); a scan-resistant policy keeps the part that fits.
"""

from __future__ import annotations

import re
import urllib.request
from typing import Any

from bench.dataset import DatasetSpec, MiB
from bench.host import drop_caches
from bench.systems import CloudFS, MountError
from bench.workloads import PassFailed, run_pass

POLICIES = ("lru", "tinylfu")
EPOCHS = 3
MEMORY_CACHE = "64M"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def scrape(port: int) -> dict[str, float]:
    """Every sample of the mount's metrics endpoint, keyed ``name{labels}``."""
    url = f"http://127.0.0.1:{port}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and not line.startswith("#"):
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def delta(before: dict[str, float], after: dict[str, float], key: str) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


def ufs_read_bytes(before: dict[str, float], after: dict[str, float]) -> float | None:
    """Bytes read from the UFS per ``cloudfs_ufs_bytes_total``; None if it has no read series."""
    keys = [
        k
        for k in after
        if k.startswith("cloudfs_ufs_bytes_total{")
        and any(word in k for word in ('"read"', '"in"', '"get"', '"download"', '"rx"'))
    ]
    if not keys:
        return None
    return sum(delta(before, after, k) for k in keys)


def epoch_stats(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    disk_hits = delta(before, after, 'cloudfs_blockcache_hits_total{tier="disk"}')
    disk_misses = delta(before, after, 'cloudfs_blockcache_misses_total{tier="disk"}')
    mem_hits = delta(before, after, 'cloudfs_blockcache_hits_total{tier="memory"}')
    looked_up = disk_hits + disk_misses
    ufs = ufs_read_bytes(before, after)
    return {
        "disk_hits": disk_hits,
        "disk_misses": disk_misses,
        "memory_hits": mem_hits,
        "disk_hit_ratio": disk_hits / looked_up if looked_up else None,
        "ufs_read_mib": None if ufs is None else ufs / MiB,
        "disk_miss_mib": delta(before, after, 'cloudfs_blockcache_miss_bytes_total{tier="disk"}')
        / MiB,
        "evictions_disk": delta(before, after, 'cloudfs_blockcache_evictions_total{tier="disk"}'),
    }


def run(system: CloudFS, spec: DatasetSpec, timeout: float, log: Any) -> dict[str, Any]:
    help_text = system.help_text()
    cache_size = spec.large_bytes // 2
    out: dict[str, Any] = {}
    for policy in POLICIES:
        if "--cache-policy" not in help_text or policy not in help_text:
            reason = f"`cloudfs mount --help` offers no --cache-policy {policy}: variant skipped"
            log(f"  eviction/{policy}: SKIPPED: {reason}")
            out[policy] = {"skipped": reason}
            continue
        log(f"  eviction/{policy}: cache {cache_size // MiB} MiB for {spec.large_bytes // MiB} MiB")
        epochs: list[dict[str, Any]] = []
        entry: dict[str, Any] = {"cache_size_mib": cache_size // MiB, "epochs": epochs}
        options = {
            "cache_size": f"{cache_size // MiB}M",
            "memory_cache_size": MEMORY_CACHE,
            "cache_policy": policy,
        }
        mount = None
        try:
            with system.mounted(**options) as mount:
                assert mount.metrics_port is not None
                paths = [str(mount.root / k) for k in spec.large_keys()]
                for epoch in range(1, EPOCHS + 1):
                    drop_caches()
                    before = scrape(mount.metrics_port)
                    read = run_pass(
                        {"kind": "read", "paths": paths, "readers": 1}, timeout, mount.abort
                    )
                    stats = {"epoch": epoch, "mib_s": read["mib_s"]}
                    stats.update(epoch_stats(before, scrape(mount.metrics_port)))
                    epochs.append(stats)
                    ratio = stats["disk_hit_ratio"]
                    log(
                        f"    epoch {epoch}: {read['mib_s']:.0f} MiB/s, disk hit ratio "
                        f"{'n/a' if ratio is None else f'{ratio:.1%}'}"
                    )
        except (PassFailed, MountError, OSError) as e:
            entry["error"] = str(e)
            log(f"  eviction/{policy} FAILED: {e}")
        if mount is not None:
            entry["peak_mib"] = mount.peak_mib
            if mount.notes:
                entry["mount_notes"] = list(mount.notes)
        out[policy] = entry
    return out
