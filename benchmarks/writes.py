"""CloudFS write-back against write-through, s3fs-fuse, rclone and local disk (issue 5).

Starts one S3 server on 127.0.0.1 (moto, or s3rver: ``--origin``) and a TCP proxy in front
of it that waits 50 ms before each request (``--delay-ms``); every system mounts the bucket
through the proxy. With (c), each repeat first measures the origin's own rate for the same
new files, boto3 PUTs from as many threads (bench/origin.py).
Then, ``--repeats`` times, on every system (the order rotating): (a) one large file
written in 1 MiB writes then closed, (b) many 1 MiB files each opened, written and closed,
(c) 2,000 new 110 KiB files created, written and closed by 8 threads (issue 27; local disk
also with an fsync per file) (see bench/writesuite.py and bench/writeload.py). Raw results go to
benchmarks/results/writes-*.json after every system; medians and ratios to
benchmarks/RESULTS-writes.md.

    python3 benchmarks/writes.py                     # 1 GiB + 1,000 files, 3 repeats (~25 min)
    python3 benchmarks/writes.py --quick --repeats 1 # 128 MiB + 100 files, a shake-out run
    python3 benchmarks/writes.py --systems cloudfs-back,local --quick
    python3 benchmarks/writes.py --workloads many    # only (c), all systems
    python3 benchmarks/writes.py --report-only benchmarks/results/writes-....json

Needs root (FUSE mounts, drop_caches), fuse3, s3fs and rclone; benchmarks/writes.sh
installs them first.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import shutil
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO_ROOT)]

from bench import writereport  # noqa: E402
from bench.host import can_drop_caches, machine_info  # noqa: E402
from bench.origin import client as origin_client  # noqa: E402
from bench.origin import put_many  # noqa: E402
from bench.origins import ORIGINS  # noqa: E402
from bench.systems import Context, System, unmount_leftovers  # noqa: E402
from bench.writesuite import (  # noqa: E402
    WORKLOADS,
    WRITE_SYSTEMS,
    CloudFSBack,
    WriteRun,
    WriteSpec,
)

from testkit.faults_proxy import running_proxy  # noqa: E402

BUCKET = "writes-bench"
STARTED = time.monotonic()


def log(message: str) -> None:
    elapsed = time.monotonic() - STARTED
    print(f"[{elapsed / 60:6.1f} min] {message}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="runs of everything; medians (3)")
    p.add_argument("--quick", action="store_true", help="128 MiB and 100 files")
    p.add_argument(
        "--systems",
        default=",".join(WRITE_SYSTEMS),
        help=f"comma-separated subset of {','.join(WRITE_SYSTEMS)}",
    )
    p.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help=f"comma-separated subset of {','.join(WORKLOADS)} (all)",
    )
    p.add_argument(
        "--small-budget",
        type=float,
        default=None,
        help="seconds after which the small-file pass stops a slow system (120; 60 quick)",
    )
    p.add_argument("--delay-ms", type=float, default=50.0, help="proxy delay per request (50)")
    p.add_argument("--origin", choices=sorted(ORIGINS), default="moto", help="S3 server (moto)")
    p.add_argument(
        "--pass-timeout",
        type=float,
        default=None,
        help="seconds a pass, and then the wait until it is in S3, may each take (600; 180 quick)",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("/var/tmp/cloudfs-writes"),
        help="mountpoints, caches, the local-disk directory (emptied first, removed after)",
    )
    p.add_argument("--keep-workdir", action="store_true", help="leave the workdir (logs) behind")
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        help="report to write (benchmarks/RESULTS-writes.md; "
        "results/RESULTS-writes-quick.md with --quick)",
    )
    p.add_argument("--report-only", type=Path, metavar="JSON", help="only regenerate the report")
    return p.parse_args(argv)


def preflight(systems: list[System]) -> tuple[list[System], dict[str, str]]:
    if not can_drop_caches():
        sys.exit("writes: cannot write /proc/sys/vm/drop_caches: run as root")
    if shutil.which("fusermount3") is None:
        sys.exit("writes: fusermount3 not found: apt-get install fuse3")
    skipped: dict[str, str] = {}
    ready: list[System] = []
    for system in systems:
        why = system.available()
        if why:
            log(f"skipping {system.name}: {why}")
            skipped[system.name] = why
        else:
            ready.append(system)
    return ready, skipped


def on_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace) -> Path:
    spec = WriteSpec.quick() if args.quick else WriteSpec.full()
    workloads = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
    if not workloads or set(workloads) - set(WORKLOADS):
        sys.exit(f"writes: --workloads: choose from {list(WORKLOADS)}")
    spec = dataclasses.replace(spec, workloads=workloads)
    if args.small_budget is not None:
        spec = dataclasses.replace(spec, small_budget_s=args.small_budget)
    timeout = args.pass_timeout or (180.0 if args.quick else 600.0)
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = [n for n in names if n not in WRITE_SYSTEMS]
    if unknown:
        sys.exit(f"writes: unknown systems {unknown}; choose from {list(WRITE_SYSTEMS)}")

    workdir: Path = args.workdir.resolve()
    unmount_leftovers(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    json_path = args.results_dir / f"writes-{stamp}{'-quick' if args.quick else ''}.json"
    command = "python3 benchmarks/writes.py" + "".join(" " + shlex.quote(a) for a in sys.argv[1:])
    data: dict[str, Any] = {
        "meta": {
            "command": command,
            "quick": args.quick,
            "repeats_requested": args.repeats,
            "workloads": spec.as_dict(),
            "workload_text": spec.describe(),
            "delay_ms": args.delay_ms,
            "origin": args.origin,
            "machine": machine_info(REPO_ROOT),
            "pass_timeout_s": timeout,
            "cloudfs_options": {k: v for k, v in CloudFSBack.DEFAULTS.items() if k != "write_mode"},
        },
        "repeats": [],
    }

    def save() -> None:
        data["meta"]["wall_seconds"] = time.monotonic() - STARTED
        json_path.write_text(json.dumps(data, indent=1) + "\n")

    try:
        with ORIGINS[args.origin]() as origin, running_proxy(origin.endpoint) as proxy:
            proxy.delay = args.delay_ms / 1000
            client = origin_client(origin.endpoint, origin.env)
            client.create_bucket(Bucket=BUCKET)
            log(f"{origin.name} at {origin.endpoint}, behind a {args.delay_ms:g} ms proxy at "
                f"{proxy.endpoint}")  # fmt: skip
            log(f"workloads: {spec.describe()}")
            env = dict(origin.env)
            env["AWS_ENDPOINT_URL_S3"] = proxy.endpoint
            ctx = Context(
                workdir=workdir,
                endpoint=proxy.endpoint,
                s3_env=env,
                bucket=BUCKET,
                local_root=workdir / "local",
                repo_root=REPO_ROOT,
            )
            ctx.local_root.mkdir()
            systems, skipped = preflight([WRITE_SYSTEMS[n](ctx) for n in names])
            data["meta"]["skipped"] = skipped
            versions = {s.name: s.version() for s in systems if s.is_fuse}
            cloudfs = [
                versions.pop(n) for n in ("cloudfs-back", "cloudfs-through") if n in versions
            ]
            data["meta"]["cloudfs_version"] = cloudfs[0] if cloudfs else "?"
            data["meta"]["versions"] = versions
            for index in range(args.repeats):
                rep: dict[str, Any] = {"index": index, "systems": {}}
                data["repeats"].append(rep)
                if "many" in workloads:
                    log(f"repeat {index + 1}/{args.repeats}: the origin's own PUTs")
                    rep["systems"]["origin"] = put_many(
                        proxy.endpoint, env, BUCKET, f"origin-{index}", spec.many_count,
                        spec.many_size, spec.many_threads,
                    )  # fmt: skip
                    save()
                shift = index % max(1, len(systems))  # rotate: no system always goes first
                for system in systems[shift:] + systems[:shift]:
                    log(f"repeat {index + 1}/{args.repeats}: {system.label}")
                    write_run = WriteRun(system, spec, index, client, proxy, timeout, log)
                    rep["systems"][system.name] = write_run.run()
                    save()
    finally:
        left = unmount_leftovers(workdir)
        if left:
            log(f"lazily unmounted leftovers: {left}")
        if not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        data["meta"]["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
        save()
        log(f"raw results: {json_path}")
    return json_path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    if args.report_only:
        json_path = args.report_only
        data = json.loads(json_path.read_text())
        quick = bool(data["meta"].get("quick"))
    else:
        json_path = run(args)
        data = json.loads(json_path.read_text())
        quick = args.quick
    target = args.report or (
        args.results_dir / "RESULTS-writes-quick.md" if quick else BENCH_DIR / "RESULTS-writes.md"
    )
    writereport.write(data, target, json_path)
    log(f"report: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
