"""The runs of the epoch benchmark (``benchmarks/epochs.py``) and what is measured in each.

A run is one fresh CloudFS mount (``--read-only``: dataset mode; a new, empty cache
directory) and one DataLoader child (``bench.epochload``) reading one or more epochs of
the data set through it. Before each epoch the kernel's caches are dropped (``sync; echo
3 > /proc/sys/vm/drop_caches``: the data set stands for one larger than RAM, so epoch 2
is not served from the page cache), the mount's metrics are read and the proxy's request
counts zeroed; after it, the metrics are read again (while the epoch's announcement is
still alive: its job series go when it ends) and the proxy's object GETs counted.

Per epoch: seconds, files/s, object GETs, GET-based hit ratio (1 - GETs/files: each
file is one 1 MiB block, so each file the cache did not keep costs one GET), the job's
byte hit ratio (``cloudfs_job_hit_bytes_total / cloudfs_job_read_bytes_total``: a read
the cache held when it came, prefetched or kept), stall seconds, prefetched bytes, the
predicted cached fraction (``cloudfs_job_next_epoch_cached_ratio`` and the
announcement's ``cached_ratio``), and the disk tier's hits and misses.
"""

from __future__ import annotations

import concurrent.futures
import os
import random
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.epochload import EpochFailed, LoaderChild
from bench.eviction import scrape
from bench.host import drop_caches
from bench.origin import client as origin_client
from bench.systems import CloudFSReadOnly, Context, Mount, MountError, descendants

Log = Callable[[str], None]
CORES = os.cpu_count() or 1
KiB = 1 << 10
MiB = 1 << 20


@dataclass(frozen=True)
class EpochSpec:
    """The data set, the loader and the mount options every run shares."""

    files: int = 5000
    size: int = 110 * KiB
    dirs: int = 10
    batch_size: int = 32
    memory_cache: str = "32M"
    block_size: str = "1M"
    window: int = 1024  # CloudFSSampler's cache_first window (samples)
    seed: int = 1234
    plain_w0_max_files: int | None = None  # cut the slow cold plain epoch (see RunSpec)
    extra_options: tuple[tuple[str, str], ...] = ()  # more `cloudfs mount` options, every run

    @classmethod
    def full(cls) -> EpochSpec:
        return cls(plain_w0_max_files=1000)

    @classmethod
    def quick(cls) -> EpochSpec:
        return cls(files=1000, window=256)

    @property
    def total_bytes(self) -> int:
        return self.files * self.size

    def keys(self) -> list[str]:
        return sorted(f"train/d{i % self.dirs:02d}/f{i:05d}.bin" for i in range(self.files))

    def describe(self) -> str:
        return (
            f"{self.files:,} files x {self.size // KiB} KiB "
            f"({self.total_bytes / MiB:.0f} MiB) in {self.dirs} directories"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunSpec:
    """One mount and one loader: ``name`` keys the results."""

    name: str
    scenario: int
    mode: str  # epochload.MODES
    workers: int
    epochs: int
    cache: str  # "full" (twice the data set) or "half"
    policy: str | None = None  # --cache-policy; None: the mount's default (tinylfu)
    max_files: int | None = None  # stop each epoch after this many files (a rate only)

    def label(self) -> str:
        what = {"plain": "no announcements", "announce": "announced", "cache_first": "cache_first"}
        pol = f", {self.policy}" if self.policy else ", tinylfu (default)"
        return f"{what[self.mode]}, num_workers {self.workers}, {self.cache} cache{pol}"


def runs(
    spec: EpochSpec, workers: tuple[int, ...] = (0, 4), half_workers: int = 4
) -> list[RunSpec]:
    out = []
    for w in workers:
        cut = spec.plain_w0_max_files if w == 0 else None
        out.append(RunSpec(f"cold-w{w}-plain", 1, "plain", w, 1, "full", max_files=cut))
        out.append(RunSpec(f"cold-w{w}-announce", 1, "announce", w, 1, "full"))
    w = half_workers
    out += [
        RunSpec("half-announce", 2, "announce", w, 3, "half"),
        RunSpec("half-lru", 2, "plain", w, 3, "half", policy="lru"),
        RunSpec("half-tinylfu", 2, "plain", w, 3, "half", policy="tinylfu"),
        RunSpec("half-cache-first", 3, "cache_first", w, 3, "half"),
    ]
    return out


def populate(spec: EpochSpec, client: Any, bucket: str) -> float:
    """Write the data set straight to the S3 server (not through the proxy)."""
    start = time.monotonic()
    client.create_bucket(Bucket=bucket)

    def put(key: str) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=os.urandom(spec.size))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for _ in pool.map(put, spec.keys()):
            pass
    return time.monotonic() - start


def origin_rate(
    endpoint: str,
    env: dict[str, str],
    bucket: str,
    keys: list[str],
    threads: int = 16,
    moto_pid: int | None = None,
) -> dict[str, Any]:
    """Files/s of ``threads`` boto3 threads GETting ``keys`` (shuffled) through ``endpoint``."""
    s3 = origin_client(endpoint, env)
    order = list(keys)
    random.Random(7).shuffle(order)

    def get(key: str) -> int:
        return len(s3.get_object(Bucket=bucket, Key=key)["Body"].read())

    get(order[0])  # connections and credentials set up outside the timing
    cpu0 = (self_cpu(), cpu_seconds(moto_pid))
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        got = sum(pool.map(get, order))
    seconds = time.perf_counter() - start
    cpu = {"client_and_proxy": self_cpu() - cpu0[0], "moto": cpu_seconds(moto_pid) - cpu0[1]}
    return {
        "files": len(order),
        "bytes": got,
        "seconds": seconds,
        "files_s": len(order) / seconds,
        "cpu_s": cpu,
        "cpu_busy": sum(cpu.values()) / (seconds * CORES),
    }


# --- per-epoch measurements --------------------------------------------------------------


def _sum(samples: dict[str, float], name: str) -> float:
    prefix = name + "{"
    return sum(v for k, v in samples.items() if k.startswith(prefix) or k == name)


def _gauge(samples: dict[str, float], name: str) -> float | None:
    found = [v for k, v in samples.items() if k.startswith(name + "{") or k == name]
    return found[-1] if found else None


JOB_COUNTERS = {
    "job_read_files": "cloudfs_job_read_files_total",
    "job_read_bytes": "cloudfs_job_read_bytes_total",
    "job_hit_bytes": "cloudfs_job_hit_bytes_total",
    "job_prefetch_hit_bytes": "cloudfs_job_prefetch_hit_bytes_total",
    "job_stall_s": "cloudfs_job_stall_seconds_total",
    "job_prefetched_bytes": "cloudfs_job_prefetched_bytes_total",
    "job_prefetch_unused_bytes": "cloudfs_job_prefetch_unused_bytes_total",
    "disk_hits": 'cloudfs_blockcache_hits_total{tier="disk"}',
    "disk_misses": 'cloudfs_blockcache_misses_total{tier="disk"}',
    "memory_hits": 'cloudfs_blockcache_hits_total{tier="memory"}',
    "disk_evictions": 'cloudfs_blockcache_evictions_total{tier="disk"}',
}


def fuse_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """FUSE requests and UFS requests by op over the epoch, and the seconds the mount spent
    answering (FUSE) or waiting for them (UFS: from the request to the end of its body)."""
    ops: dict[str, float] = {}
    seconds: dict[str, float] = {}
    ufs: dict[str, float] = {}
    ufs_seconds: dict[str, float] = {}
    for key, value in after.items():
        for prefix, into in (
            ("cloudfs_fuse_ops_total{", ops),
            ("cloudfs_fuse_op_seconds_sum{", seconds),
            ("cloudfs_ufs_requests_total{", ufs),
            ("cloudfs_ufs_request_seconds_sum{", ufs_seconds),
        ):
            if key.startswith(prefix) and 'op="' in key:
                op = key.split('op="', 1)[1].split('"', 1)[0]
                d = value - before.get(key, 0.0)
                if d:
                    into[op] = round(d, 4)
    return {"fuse_ops": ops, "fuse_seconds": seconds, "ufs_ops": ufs, "ufs_seconds": ufs_seconds}


def metric_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    out = {}
    for name, metric in JOB_COUNTERS.items():
        if "{" in metric:
            b, a = before.get(metric, 0.0), after.get(metric, 0.0)
        else:
            b, a = _sum(before, metric), _sum(after, metric)
        out[name] = a - b if a >= b else a  # a job's series restart when it ended in between
    return out


def object_gets(requests: list[tuple[str, str]], bucket: str) -> dict[str, int]:
    """The proxy's requests by kind: object GETs (one per file missed), LISTs, HEADs."""
    gets = lists = heads = other = 0
    for method, target in requests:
        path, _, query = target.partition("?")
        is_object = path.strip("/").count("/") >= 1 and path.strip("/").startswith(bucket)
        if method == "GET" and is_object and "list-type" not in query:
            gets += 1
        elif method == "GET":
            lists += 1
        elif method == "HEAD":
            heads += 1
        else:
            other += 1
    return {"gets": gets, "lists": lists, "heads": heads, "other": other}


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds of ``pid`` so far: its own, its reaped children's, its live descendants'."""
    if pid is None:
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for i, p in enumerate([pid, *descendants(pid)]):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # utime, stime, cutime, cstime are fields 14-17 (1-based); [0] here is field 3
        total += int(fields[11]) + int(fields[12])
        if i == 0:
            total += int(fields[13]) + int(fields[14])
    return total / tick


def self_cpu() -> float:
    """This process's CPU seconds (the proxy's threads live here; the parent is idle else)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class RunResult:
    name: str
    epochs: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    mount_notes: list[str] = field(default_factory=list)
    peak_mib: float | None = None
    options: dict[str, str] = field(default_factory=dict)
    mount_facts: dict[str, Any] = field(default_factory=dict)


class EpochRun:
    """One ``RunSpec`` on a fresh mount."""

    def __init__(
        self,
        ctx: Context,
        spec: EpochSpec,
        run: RunSpec,
        proxy: Any,
        timeout: float,
        log: Log,
        moto_pid: int | None = None,
    ) -> None:
        self.moto_pid = moto_pid
        self.ctx = ctx
        self.spec = spec
        self.run_spec = run
        self.proxy = proxy
        self.timeout = timeout
        self.log = log

    def options(self) -> dict[str, str]:
        spec, run = self.spec, self.run_spec
        cache = spec.total_bytes * 2 if run.cache == "full" else spec.total_bytes // 2
        opts = {
            "memory_cache_size": spec.memory_cache,
            "block_size": spec.block_size,
            "cache_size": str(cache),
            "free_space_ratio": "0",
        }
        if run.policy:
            opts["cache_policy"] = run.policy
        opts.update(dict(spec.extra_options))
        return opts

    def execute(self) -> RunResult:
        run = self.run_spec
        result = RunResult(run.name, options=self.options())
        system = CloudFSReadOnly(self.ctx)
        mount: Mount | None = None
        try:
            with system.mounted(**result.options) as mount:
                result.mount_facts = dict(mount.facts)
                self._epochs(mount, result)
        except (EpochFailed, MountError, OSError) as e:
            result.error = str(e)
            self.log(f"  {run.name} FAILED: {e}")
        if mount is not None:
            result.peak_mib = mount.peak_mib
            result.mount_notes = list(mount.notes)
        return result

    def _paths(self, mount: Mount) -> list[str]:
        """List the data set through the mount, as a training script would."""
        paths = []
        top = mount.root / "train"
        for d in sorted(os.listdir(top)):
            with os.scandir(top / d) as it:
                paths.extend(entry.path for entry in it if entry.is_file())
        paths.sort()
        if len(paths) != self.spec.files:
            raise MountError(f"listed {len(paths)} files through the mount, not {self.spec.files}")
        return paths

    def _epochs(self, mount: Mount, result: RunResult) -> None:
        spec, run = self.spec, self.run_spec
        assert mount.metrics_port is not None
        port = mount.metrics_port
        paths = self._paths(mount)
        log_path = self.ctx.logs / f"loader-{run.name}-{time.strftime('%H%M%S')}.log"
        child = LoaderChild(
            {
                "paths": paths,
                "workers": run.workers,
                "batch_size": spec.batch_size,
                "mode": run.mode,
                "seed": spec.seed,
                "epochs": list(range(1, run.epochs + 1)),
                "job": f"bench-{run.name}",
                "window": spec.window,
                "max_files": run.max_files,
            },
            log_path,
        )
        try:
            for _ in range(run.epochs):
                if child.ready(120.0) is None:
                    break
                drop_caches()
                before = scrape(port)
                self.proxy.reset_counts()
                pids = {"mount": mount.proc.pid if mount.proc else None,
                        "moto": self.moto_pid, "loader": child.proc.pid}  # fmt: skip
                cpu0 = {k: cpu_seconds(p) for k, p in pids.items()} | {"proxy": self_cpu()}
                got = child.epoch(self.timeout)
                cpu1 = {k: cpu_seconds(p) for k, p in pids.items()} | {"proxy": self_cpu()}
                after = scrape(port)
                got["cpu_s"] = {k: cpu1[k] - cpu0[k] for k in cpu0}
                got["cpu_busy"] = sum(got["cpu_s"].values()) / (got["seconds"] * CORES)
                with self.proxy._lock:  # a consistent copy of the request list
                    requests = list(self.proxy.requests)
                got.update(object_gets(requests, self.ctx.bucket))
                got.update(metric_deltas(before, after))
                got.update(fuse_deltas(before, after))
                got["predicted_cached"] = _gauge(after, "cloudfs_job_next_epoch_cached_ratio")
                got["gets_per_file"] = got["gets"] / got["files"] if got["files"] else None
                got["get_hit_ratio"] = 1 - got["gets"] / got["files"] if got["files"] else None
                read = got["job_read_bytes"]
                got["job_hit_ratio"] = got["job_hit_bytes"] / read if read else None
                result.epochs.append(got)
                self.log(f"    epoch {got['epoch']}: {describe_epoch(got)}")
            child.ready(120.0)
        finally:
            child.close()


def describe_epoch(e: dict[str, Any]) -> str:
    parts = [f"{e['seconds']:.1f} s", f"{e['files_s']:.0f} files/s", f"{e['gets']} GETs"]
    if e.get("get_hit_ratio") is not None:
        parts.append(f"GET hit {e['get_hit_ratio']:.1%}")
    if e.get("job_hit_ratio") is not None:
        parts.append(f"job hit {e['job_hit_ratio']:.1%}")
    if e.get("predicted_cached") is not None:
        parts.append(f"predicted {e['predicted_cached']:.1%}")
    if e.get("job_stall_s"):
        parts.append(f"stall {e['job_stall_s']:.1f} s")
    if e.get("cpu_s"):
        cpu = e["cpu_s"]
        parts.append(
            f"CPU {e['cpu_busy']:.0%} of {CORES} cores (mount {cpu['mount']:.1f} s, moto "
            f"{cpu['moto']:.1f}, loader {cpu['loader']:.1f}, proxy {cpu['proxy']:.1f})"
        )
    if e.get("cut"):
        parts.append(f"cut at {e['files']} files")
    return ", ".join(parts)
