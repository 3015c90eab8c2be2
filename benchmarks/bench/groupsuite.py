"""The cases of the cache-group benchmark (``benchmarks/cache_group.py``, issue 14).

A case is N simulated nodes reading the whole data set at once, cold: N fresh
``--read-only`` mounts (empty cache directories), and, "with group", N fresh cache
workers (``cloudfs cache serve``, one per node, empty) given to every mount as
``--cache-peers``. Mounts and workers reach the object store through the counting,
delaying proxy, so what the origin sent is counted there (every response byte, by
method), not by CloudFS's own metrics.

Two phases per case, on the same mounts: the large files, then the small ones. Before
each the kernel's caches are dropped and the proxy's counts zeroed; every mount reads
every file of the phase (its own rotation of the order, so the nodes do not march in
step) in a child process (``bench.workloads`` ``readcrc``), all mounts at once, and each
file's crc32 is checked against the one written.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
import zlib
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.eviction import scrape
from bench.host import drop_caches
from bench.systems import CloudFSReadOnly, Mount
from bench.workloads import PassFailed, run_pass
from testkit.cache_workers import running_cache_workers
from testkit.faults_proxy import FaultsProxy

Log = Callable[[str], None]
KiB = 1 << 10
MiB = 1 << 20
PHASES = ("large", "small")


@dataclass(frozen=True)
class GroupSpec:
    """The data set, the readers and the cache sizes every case shares.

    Large: 32 x 32 MiB rather than 8 x 128 MiB, because moto reads the whole object for
    every ranged GET and a group's worker fetches one 4 MiB range per block: with 128 MiB
    objects the origin's own CPU per block (~85 ms) would be what the group case measures.
    Small: 100 KiB, about an ImageNet JPEG; each file is one block (4 MiB blocks).
    """

    large_count: int = 32
    large_size: int = 32 * MiB
    small_count: int = 5000
    small_size: int = 100 * KiB
    small_dirs: int = 10
    large_readers: int = 4  # files read at once per mount
    small_readers: int = 8
    nodes: tuple[int, ...] = (1, 2, 3)
    mount_memory: str = "256M"
    worker_memory: str = "256M"
    disk_cache: str = "8G"

    @classmethod
    def full(cls) -> GroupSpec:
        return cls()

    @classmethod
    def quick(cls) -> GroupSpec:
        return cls(large_count=8, large_size=8 * MiB, small_count=500)

    def keys(self, phase: str) -> list[str]:
        if phase == "large":
            return [f"large/file{i:03d}.bin" for i in range(self.large_count)]
        return sorted(
            f"small/d{i % self.small_dirs:02d}/f{i:05d}.bin" for i in range(self.small_count)
        )

    def size(self, phase: str) -> int:
        return self.large_size if phase == "large" else self.small_size

    def phase_bytes(self, phase: str) -> int:
        return len(self.keys(phase)) * self.size(phase)

    def readers(self, phase: str) -> int:
        return self.large_readers if phase == "large" else self.small_readers

    def describe(self) -> str:
        return (
            f"{self.large_count} x {self.large_size // MiB} MiB under large/ "
            f"({self.phase_bytes('large') / MiB:,.0f} MiB), {self.small_count:,} x "
            f"{self.small_size // KiB} KiB in {self.small_dirs} directories under small/ "
            f"({self.phase_bytes('small') / MiB:,.0f} MiB)"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def populate(spec: GroupSpec, client: Any, bucket: str) -> tuple[float, dict[str, int]]:
    """Write the data set straight to the S3 server; (seconds, crc32 per key)."""
    start = time.monotonic()
    client.create_bucket(Bucket=bucket)
    crcs: dict[str, int] = {}

    def put(key: str, size: int) -> None:
        data = os.urandom(size)
        crcs[key] = zlib.crc32(data)
        client.put_object(Bucket=bucket, Key=key, Body=data)

    for key in spec.keys("large"):
        put(key, spec.large_size)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: put(k, spec.small_size), spec.keys("small")))
    return time.monotonic() - start, crcs


@dataclass
class PhaseResult:
    files: int  # per mount
    bytes_per_mount: int
    seconds: float  # wall, from the first reader's start to the last one's end
    mib_s: float  # aggregate: every mount's bytes / seconds
    files_s: float  # aggregate
    origin_get_bytes: int  # response bytes of GETs at the proxy (bodies, headers, LISTs)
    origin_all_bytes: int  # every response byte at the proxy (HEADs too)
    origin_requests: dict[str, int]
    origin_multiple: float  # origin_all_bytes / the phase's data set
    per_mount_s: list[float]
    peer_bytes: float  # cloudfs_peer_bytes_total over the mounts
    peer_errors: float  # cloudfs_peer_requests_total{result="error"} over the mounts
    wrong_files: int  # files whose size or crc32 was not what was written


@dataclass
class CaseResult:
    nodes: int
    group: bool
    phases: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.nodes}-{'group' if self.group else 'alone'}"


class GroupCase:
    """One case: ``nodes`` mounts, with or without a group of ``nodes`` workers."""

    def __init__(
        self,
        system: CloudFSReadOnly,
        spec: GroupSpec,
        proxy: FaultsProxy,
        crcs: dict[str, int],
        nodes: int,
        group: bool,
        timeout: float,
        log: Log,
    ) -> None:
        self.system = system
        self.spec = spec
        self.proxy = proxy
        self.crcs = crcs
        self.nodes = nodes
        self.group = group
        self.timeout = timeout
        self.log = log

    def execute(self) -> CaseResult:
        result = CaseResult(self.nodes, self.group)
        start = time.monotonic()
        try:
            with ExitStack() as stack:
                options = {
                    "memory_cache_size": self.spec.mount_memory,
                    "cache_size": self.spec.disk_cache,
                }
                if self.group:
                    workers = stack.enter_context(
                        running_cache_workers(
                            self.nodes, self.system.env(), options=self.worker_options()
                        )
                    )
                    options["cache_peers"] = ",".join(w.address for w in workers)
                mounts = [
                    stack.enter_context(self.system.mounted(**options)) for _ in range(self.nodes)
                ]
                for phase in PHASES:
                    got = self._phase(phase, mounts)
                    result.phases[phase] = asdict(got)
                    if got.wrong_files:
                        result.errors.append(f"{phase}: {got.wrong_files} files read wrong")
        except (PassFailed, RuntimeError, OSError) as e:
            result.errors.append(f"{type(e).__name__}: {e}")
        result.seconds = time.monotonic() - start
        return result

    def worker_options(self) -> list[str]:
        return [
            "--s3-endpoint", self.system.ctx.endpoint, "--cache-size", self.spec.disk_cache,
            "--memory-cache-size", self.spec.worker_memory,
        ]  # fmt: skip

    def _phase(self, phase: str, mounts: list[Mount]) -> PhaseResult:
        keys = self.spec.keys(phase)
        drop_caches()
        before = [_peer_counts(m) for m in mounts]
        self.proxy.reset_counts()
        specs: list[dict[str, Any]] = []
        for n, m in enumerate(mounts):
            shift = n * len(keys) // len(mounts)
            order = keys[shift:] + keys[:shift]
            specs.append(
                {
                    "kind": "readcrc",
                    "paths": [str(m.root / k) for k in order],
                    "readers": self.spec.readers(phase),
                    "keys": order,
                }
            )
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(len(mounts)) as pool:
            futures = [
                pool.submit(run_pass, s, self.timeout, m.abort)
                for s, m in zip(specs, mounts, strict=True)
            ]
            outs = [f.result() for f in futures]
        seconds = time.perf_counter() - start
        after = [_peer_counts(m) for m in mounts]
        wrong = 0
        size = self.spec.size(phase)
        for s, out in zip(specs, outs, strict=True):
            if out["bytes"] != size * len(keys):
                wrong += 1
            wrong += sum(1 for k, c in zip(s["keys"], out["crcs"], strict=True)
                         if self.crcs[k] != c)  # fmt: skip
        data = self.spec.phase_bytes(phase)
        get_bytes = self.proxy.response_bytes("GET")
        got = PhaseResult(
            files=len(keys),
            bytes_per_mount=data,
            seconds=seconds,
            mib_s=data * len(mounts) / MiB / seconds,
            files_s=len(keys) * len(mounts) / seconds,
            origin_get_bytes=get_bytes,
            origin_all_bytes=self.proxy.response_bytes(),
            origin_requests=dict(self.proxy.counts()),
            origin_multiple=self.proxy.response_bytes() / data,
            per_mount_s=[float(o["seconds"]) for o in outs],
            peer_bytes=sum(a[0] - b[0] for a, b in zip(after, before, strict=True)),
            peer_errors=sum(a[1] - b[1] for a, b in zip(after, before, strict=True)),
            wrong_files=wrong,
        )
        self.log(
            f"    {phase}: {got.seconds:.1f} s, {got.mib_s:,.0f} MiB/s, {got.files_s:,.0f} files/s,"
            f" origin {got.origin_multiple:.2f}x, peer {got.peer_bytes / MiB:,.0f} MiB,"
            f" wrong {wrong}"
        )
        return got


def _peer_counts(mount: Mount) -> tuple[float, float]:
    """(cloudfs_peer_bytes_total, cloudfs_peer_requests_total{result="error"}) of a mount."""
    if mount.metrics_port is None:
        return 0.0, 0.0
    samples = scrape(mount.metrics_port)
    peer = sum(v for k, v in samples.items() if k.startswith("cloudfs_peer_bytes_total"))
    errors = sum(
        v
        for k, v in samples.items()
        if k.startswith("cloudfs_peer_requests_total{") and 'result="error"' in k
    )
    return peer, errors


def plan(spec: GroupSpec) -> list[tuple[int, bool]]:
    """(nodes, group) of every case, in the order they run."""
    return [(n, g) for n in spec.nodes for g in (False, True)]
