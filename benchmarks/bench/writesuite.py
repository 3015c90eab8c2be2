"""The write passes for one system (issue 5), each on a fresh mount with an empty cache.

For each workload (``large``: one big file; ``small``: many 1 MiB files; ``many``: many
new small files from several threads, and on local disk also ``many_fsync``, the same with
an fsync per file; see ``writeload``): ``sync; drop_caches``, mount, run the pass in a
child process (bounded), then wait until everything written is in the object store
(bounded): ``cloudfs flush`` on CloudFS write-back, polling the bucket on the other FUSE
systems (write-through systems are there at once; rclone uploads ``--vfs-write-back`` = 5 s
after the last close). Then
unmount, check what is in the bucket (or the local directory) against what was written,
and delete it. Requests through the latency proxy are counted from the pass's start until
everything is in the store.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from bench import objects
from bench.host import drop_caches
from bench.objects import Expected
from bench.systems import CloudFS, LocalDisk, Mount, MountError, Rclone, S3fs, System
from bench.workloads import PassFailed, run_pass
from bench.writeload import small_name

MiB = 1 << 20
WORKLOADS = ("large", "small", "many")
Log = Callable[[str], None]


class CloudFSBack(CloudFS):
    name = "cloudfs-back"
    label = "CloudFS back"
    DEFAULTS = {**CloudFS.DEFAULTS, "write_mode": "back"}


class CloudFSThrough(CloudFS):
    name = "cloudfs-through"
    label = "CloudFS through"
    DEFAULTS = {**CloudFS.DEFAULTS, "write_mode": "through"}


WRITE_SYSTEMS: dict[str, type[System]] = {
    cls.name: cls for cls in (CloudFSBack, CloudFSThrough, S3fs, Rclone, LocalDisk)
}


@dataclass(frozen=True)
class WriteSpec:
    large_size: int
    small_count: int
    small_budget_s: float  # a slower system writes fewer small files (see writeload)
    small_size: int = MiB
    many_count: int = 2000  # (c), issue 27: new small files from several threads
    many_size: int = 110 * 1024
    many_threads: int = 8
    many_budget_s: float = 60.0  # then no new file is started (s3fs would take ~10 min)
    workloads: tuple[str, ...] = WORKLOADS

    @classmethod
    def full(cls) -> WriteSpec:
        return cls(large_size=1024 * MiB, small_count=1000, small_budget_s=120.0)

    @classmethod
    def quick(cls) -> WriteSpec:
        return cls(large_size=128 * MiB, small_count=100, small_budget_s=60.0, many_count=200)

    def describe(self) -> str:
        parts = {
            "large": f"(a) one {self.large_size // MiB} MiB file in 1 MiB writes",
            "small": f"(b) {self.small_count:,} files of {self.small_size // MiB} MiB, one "
            f"thread, stopped after {self.small_budget_s:.0f} s if not done",
            "many": f"(c) {self.many_count:,} new files of {self.many_size // 1024} KiB "
            f"(create, one write, close) from {self.many_threads} threads, no new file "
            f"started after {self.many_budget_s:.0f} s; on local disk also with an fsync "
            "before each close",
        }
        return "; ".join(parts[w] for w in self.workloads)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class WriteRun:
    """Both workloads on one system in one repeat: results, raw pass output and errors."""

    def __init__(
        self,
        system: System,
        spec: WriteSpec,
        repeat: int,
        client: Any,
        proxy: Any,
        timeout: float,
        log: Log,
    ) -> None:
        self.system, self.spec, self.repeat = system, spec, repeat
        self.client, self.proxy, self.timeout, self.log = client, proxy, timeout, log
        self.bucket = system.ctx.bucket
        self.results: dict[str, float | None] = {}
        self.raw: dict[str, Any] = {}
        self.errors: list[str] = []
        self.verified: dict[str, bool] = {}

    def run(self) -> dict[str, Any]:
        start = time.monotonic()
        for workload in self.spec.workloads:
            self.phase(workload)
            if workload == "many" and isinstance(self.system, LocalDisk):
                self.phase("many_fsync")
        if self.system.is_fuse:  # directory markers some systems leave behind
            objects.delete_prefix(self.client, self.bucket, f"{self.system.name}-r{self.repeat}/")
        return {
            "results": self.results,
            "raw": self.raw,
            "errors": self.errors,
            "verified": self.verified,
            "seconds": time.monotonic() - start,
        }

    def expected(self, workload: str, prefix: str) -> list[Expected]:
        base = self.repeat * 100_000
        if workload == "large":
            return [Expected(prefix + "large.bin", base, self.spec.large_size)]
        if workload == "small":
            return [
                Expected(prefix + small_name(i), base + 1 + i, self.spec.small_size)
                for i in range(self.spec.small_count)
            ]
        return [
            Expected(prefix + small_name(i), base + 50_000 + i, self.spec.many_size)
            for i in range(self.spec.many_count)
        ]

    def pass_spec(self, workload: str, mount: Mount, expected: list[Expected]) -> dict[str, Any]:
        if workload == "large":
            e = expected[0]
            return {"kind": "large", "path": str(mount.root / e.key), "file_id": e.file_id,
                    "size": e.size}  # fmt: skip
        if workload.startswith("many"):
            return {"kind": "many", "dir": str(mount.root / expected[0].key).rsplit("/", 1)[0],
                    "count": len(expected), "size": self.spec.many_size,
                    "first_id": expected[0].file_id, "threads": self.spec.many_threads,
                    "fsync": workload == "many_fsync",
                    "budget_s": self.spec.many_budget_s}  # fmt: skip
        return {
            "kind": "small",
            "dir": str(mount.root / expected[0].key).rsplit("/", 1)[0],
            "count": len(expected),
            "size": self.spec.small_size,
            "first_id": expected[0].file_id,
            "budget_s": self.spec.small_budget_s,
        }

    def phase(self, workload: str) -> None:
        name = self.system.name
        prefix = f"{name}-r{self.repeat}/{workload}/"
        expected = self.expected(workload, prefix)
        self.log(f"  {name}: {workload}")
        self.verified[workload] = False
        out: dict[str, Any] | None = None
        mount: Mount | None = None
        unmount_start = time.monotonic()
        try:
            drop_caches()
            with self.system.mounted() as mount:
                self.proxy.reset_counts()
                spec = self.pass_spec(workload, mount, expected)
                out = run_pass(spec, self.timeout, mount.abort, module="bench.writeload")
                expected = expected[: int(out.get("files", len(expected)))]
                self.record(workload, out)
                self.durable(workload, mount, prefix, expected, out)
                requests = sum(self.proxy.counts().values())
                if self.system.is_fuse:
                    self.results[f"{workload}_requests_per_file"] = requests / len(expected)
                unmount_start = time.monotonic()
            self.raw[f"{workload}_unmount_s"] = time.monotonic() - unmount_start
        except (PassFailed, MountError, OSError, subprocess.SubprocessError) as e:
            self.errors.append(f"{workload}: {e}")
            self.log(f"  {name}: {workload} FAILED: {e}")
        if mount is not None and self.system.is_fuse:
            self.raw[f"{workload}_peak_mib"] = mount.peak_mib
            if mount.notes:
                self.errors.append(f"{workload}: mount {', '.join(mount.notes)}")
        try:
            if out is not None:
                self.check(workload, prefix, expected)
            self.clean(prefix)
        except Exception as e:  # the store could not be read: an error, not a pass
            self.errors.append(f"{workload}: verify: {type(e).__name__}: {e}")
            self.log(f"  {name}: {workload} VERIFY FAILED: {e}")

    def record(self, workload: str, out: dict[str, Any]) -> None:
        self.raw[workload] = out
        if workload == "large":
            keys = {"large_mib_s": "mib_s", "large_close_ms": "close_ms"}
        elif workload.startswith("many"):
            keys = {f"{workload}_{k}": k for k in ("files_s", "open_p50_ms", "write_p50_ms",
                                                    "close_p50_ms", "close_p99_ms")}
        else:
            keys = {"small_files_s": "files_s", "small_open_p50_ms": "open_p50_ms",
                    "small_write_p50_ms": "write_p50_ms", "small_close_p50_ms": "close_p50_ms",
                    "small_close_p99_ms": "close_p99_ms"}  # fmt: skip
        for key, field in keys.items():
            self.results[key] = float(out[field])
        if workload in ("small", "many"):
            self.results[f"{workload}_files_written"] = float(out["files"])
            if out["files"] < out["files_requested"]:
                self.log(f"    stopped at the time budget after "
                         f"{out['files']} of {out['files_requested']} files")  # fmt: skip
        self.log("    " + ", ".join(f"{k}={self.results[k]:,.1f}" for k in keys))

    def durable(
        self, workload: str, mount: Mount, prefix: str, expected: list[Expected], out: Any
    ) -> None:
        """Time from the last close until everything written is in the object store."""
        if not self.system.is_fuse:
            return
        key = f"{workload}_to_s3_s"
        if isinstance(self.system, CloudFSBack):
            start = time.time()
            argv = [*self.system.cli(), "flush", str(mount.root), "--quiet",
                    "--timeout", f"{self.timeout:.0f}"]  # fmt: skip
            done = subprocess.run(argv, env=self.system.env(), capture_output=True, text=True,
                                  timeout=self.timeout + 60, check=False)  # fmt: skip
            now = time.time()
            self.results[f"{workload}_flush_s"] = now - start
            if done.returncode != 0:
                self.errors.append(f"{workload}: cloudfs flush: {done.stderr.strip()[-300:]}")
                return
            left = objects.missing(objects.listing(self.client, self.bucket, prefix), expected)
            if left:
                self.errors.append(f"{workload}: cloudfs flush returned with {left} files "
                                   f"not in the bucket")  # fmt: skip
                return
        else:
            at, left = objects.wait_complete(
                self.client, self.bucket, prefix, expected, self.timeout
            )
            if at is None:
                self.errors.append(f"{workload}: {left} files still not in the bucket "
                                   f"{self.timeout:.0f} s after the last close")  # fmt: skip
                return
            now = at
        self.results[key] = now - float(out["end_wall"])
        to_s3 = float(out["seconds"]) + self.results[key]  # from the first open
        if workload == "large":
            self.results["large_mib_s_to_s3"] = out["bytes"] / MiB / to_s3
        else:
            self.results[f"{workload}_files_s_to_s3"] = out["files"] / to_s3
        self.log(f"    {key}={self.results[key]:,.2f}")

    def check(self, workload: str, prefix: str, expected: list[Expected]) -> None:
        if self.system.is_fuse:
            found = objects.listing(self.client, self.bucket, prefix)
            errors, matched = objects.verify(
                found, expected, lambda k: objects.s3_digest(self.client, self.bucket, k)
            )
        else:
            root = self.system.ctx.local_root
            found = objects.local_listing(root, prefix)
            errors, matched = objects.verify(
                found, expected, lambda k: objects.file_digest(root / k)
            )
        self.raw[f"{workload}_hashed"] = matched
        self.verified[workload] = not errors
        for error in errors:
            self.errors.append(f"{workload}: verify: {error}")
            self.log(f"  {self.system.name}: {workload} VERIFY FAILED: {error}")
        if not errors:
            self.log(f"    verified: {len(found)} sizes, {matched} contents")

    def clean(self, prefix: str) -> None:
        if self.system.is_fuse:
            objects.delete_prefix(self.client, self.bucket, prefix)
        else:
            shutil.rmtree(self.system.ctx.local_root / prefix, ignore_errors=True)
