"""A cache group vs every node alone: 1, 2 and 3 nodes reading one data set cold (issue 14).

Starts one moto S3 server on 127.0.0.1 and a TCP proxy in front of it that waits 20 ms
before each request (``--delay-ms``) and counts every byte the origin sends; writes the
data set (32 x 32 MiB and 5,000 x 100 KiB; why those sizes: bench/groupsuite.py) straight
to the server. For 1, 2 and 3 simulated nodes, "alone" (each node a fresh ``--read-only``
mount with its own empty cache) and "group" (also one fresh ``cloudfs cache serve`` worker
per node, every mount given all of them as ``--cache-peers``): all mounts read every large
file, then every small file, at once, after dropping the kernel's caches; each file's
crc32 is checked. Measured: what the origin sent (at the proxy) as a multiple of the data
set, aggregate MiB/s and files/s, wall time. Then one 4 MiB block from a worker that holds
it vs the same range from the origin, and the ring's cost per block for 10 to 1,000 members
(bench/grouppeer.py).

Raw results go to benchmarks/results/cache-group-*.json after every case; medians and the
exact command to benchmarks/RESULTS-cache-group.md.

    python3 benchmarks/cache_group.py                      # 3 repeats, ~1 GiB + 5,000 files
    python3 benchmarks/cache_group.py --quick              # 64 MiB + 500 files, 1 repeat
    python3 benchmarks/cache_group.py --report-only benchmarks/results/cache-group-....json

Needs root (FUSE mounts, drop_caches), fuse3 and moto.
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

from bench import groupreport  # noqa: E402
from bench.grouppeer import peer_vs_origin, ring_costs  # noqa: E402
from bench.groupsuite import GroupCase, GroupSpec, plan, populate  # noqa: E402
from bench.host import can_drop_caches, machine_info  # noqa: E402
from bench.systems import CloudFSReadOnly, Context, unmount_leftovers  # noqa: E402

from testkit.faults_proxy import running_proxy  # noqa: E402
from testkit.servers import running_s3_server  # noqa: E402

BUCKET = "group-bench"
STARTED = time.monotonic()


def log(message: str) -> None:
    elapsed = time.monotonic() - STARTED
    print(f"[{elapsed / 60:6.1f} min] {message}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=None, help="runs of every case (3; quick 1)")
    p.add_argument("--quick", action="store_true", help="8 x 8 MiB + 500 files: a shake-out")
    p.add_argument("--delay-ms", type=float, default=20.0, help="proxy delay per request (20)")
    p.add_argument("--calls", type=int, default=50, help="timed calls per block transfer (50)")
    p.add_argument("--pass-timeout", type=float, default=900.0, help="seconds a read pass may take")
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("/var/tmp/cloudfs-cache-group"),
        help="mountpoints, caches, logs (emptied first, removed after)",
    )
    p.add_argument("--keep-workdir", action="store_true", help="leave the workdir (logs) behind")
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    p.add_argument("--report", type=Path, default=None, help="report to write")
    p.add_argument("--report-only", type=Path, metavar="JSON", help="only regenerate the report")
    return p.parse_args(argv)


def on_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace) -> Path:
    spec = GroupSpec.quick() if args.quick else GroupSpec.full()
    repeats = args.repeats or (1 if args.quick else 3)
    if not can_drop_caches():
        sys.exit("cache_group: cannot write /proc/sys/vm/drop_caches: run as root")
    if shutil.which("fusermount3") is None:
        sys.exit("cache_group: fusermount3 not found: apt-get install fuse3")
    workdir: Path = args.workdir.resolve()
    unmount_leftovers(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    json_path: Path = args.results_dir / f"cache-group-{stamp}{'-quick' if args.quick else ''}.json"
    command = "python3 benchmarks/cache_group.py" + "".join(
        " " + shlex.quote(a) for a in sys.argv[1:]
    )
    data: dict[str, Any] = {
        "meta": {
            "command": command,
            "quick": args.quick,
            "repeats_requested": repeats,
            "spec": spec.as_dict(),
            "workload_text": spec.describe(),
            "delay_ms": args.delay_ms,
            "machine": machine_info(REPO_ROOT),
        },
        "repeats": [],
    }

    def save() -> None:
        data["meta"]["wall_seconds"] = time.monotonic() - STARTED
        json_path.write_text(json.dumps(data, indent=1) + "\n")

    try:
        with running_s3_server() as s3, running_proxy(s3.endpoint) as proxy:
            proxy.delay = args.delay_ms / 1000
            log(f"moto at {s3.endpoint}, behind a {args.delay_ms:g} ms proxy at {proxy.endpoint}")
            log(f"writing the data set: {spec.describe()}")
            data["meta"]["populate_s"], crcs = populate(spec, s3.client(), BUCKET)
            env = s3.env()
            env["AWS_ENDPOINT_URL_S3"] = proxy.endpoint
            ctx = Context(
                workdir=workdir,
                endpoint=proxy.endpoint,
                s3_env=env,
                bucket=BUCKET,
                local_root=workdir / "local",
                repo_root=REPO_ROOT,
            )
            system = CloudFSReadOnly(ctx)
            why = system.available()
            if why:
                sys.exit(f"cache_group: {why}")
            data["meta"]["cloudfs_version"] = system.version()
            log("ring: owner/ranked per block for 10, 100, 1,000 members")
            data["ring"] = ring_costs(quick=args.quick)
            save()
            for index in range(repeats):
                rep: dict[str, Any] = {"index": index, "cases": {}}
                data["repeats"].append(rep)
                log(f"repeat {index + 1}/{repeats}: one 4 MiB block, peer vs origin")
                rep["transfer"] = peer_vs_origin(
                    system.env(), proxy.endpoint, s3.endpoint, BUCKET,
                    spec.keys("large")[0], args.calls,
                )  # fmt: skip
                t = rep["transfer"]
                log(
                    f"  peer {t['peer_s'] * 1000:.1f} ms ({t['peer_mib_s']:.0f} MiB/s), origin "
                    f"{t['origin_delayed_s'] * 1000:.1f} ms delayed, "
                    f"{t['origin_direct_s'] * 1000:.1f} ms direct"
                )
                save()
                cases = plan(spec)
                if index % 2:  # alternate which of a pair goes first
                    cases = [(n, not g) for n, g in cases]
                for nodes, group in cases:
                    mode = "group" if group else "alone"
                    log(f"repeat {index + 1}/{repeats}: {nodes} node(s), {mode}")
                    result = GroupCase(
                        system, spec, proxy, crcs, nodes, group, args.pass_timeout, log
                    ).execute()
                    for e in result.errors:
                        log(f"  ERROR: {e}")
                    rep["cases"][result.name] = dataclasses.asdict(result)
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
    else:
        json_path = run(args)
        data = json.loads(json_path.read_text())
    quick = bool(data["meta"].get("quick"))
    target = args.report or (
        args.results_dir / "RESULTS-cache-group-quick.md"
        if quick
        else BENCH_DIR / "RESULTS-cache-group.md"
    )
    groupreport.write(data, target, json_path)
    log(f"report: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
