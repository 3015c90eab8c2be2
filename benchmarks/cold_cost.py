"""What a cold read costs each FUSE client, per GiB and per file (issue 26).

For CloudFS read-write, CloudFS ``--read-only`` (dataset mode), rclone ``mount
--vfs-cache-mode full`` and s3fs ``use_cache``: large-file MiB/s and small-file files/s cold,
the FUSE daemon's CPU per GiB and per file (/proc/PID/stat), for CloudFS its GIL-held time
per GiB and per file (py-spy ``--gil``) and the share of its CPU that is, the per-node
ceiling that implies, and every daemon's peak RSS; plus the origin's own ceiling through
boto3 (bench/origin.py). Medians over ``--repeats``. Protocol and method: bench/coldcost_*.py.

    python3 benchmarks/cold_cost.py --repeats 3 --json benchmarks/results/cold-cost.json \\
        --report benchmarks/results/cold-cost.md
    python3 benchmarks/cold_cost.py --systems cloudfs,cloudfs-ro --small 500 --repeats 1
    python3 benchmarks/cold_cost.py --check-gil      # only the py-spy measure on known cases

Needs root (FUSE, drop_caches), fuse3, py-spy, and for the peers s3fs and rclone
(``apt-get update && apt-get install -y s3fs rclone``, or ``bash benchmarks/peers.sh``'s
installer). A peer that is not installed is skipped with why.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO_ROOT)]

from bench import (  # noqa: E402
    coldcost_report,
    dataset,
    origin,
    s3rver,
)
from bench.coldcost_probe import check_gil  # noqa: E402
from bench.coldcost_suite import SPY_MODES, ColdCostRun  # noqa: E402
from bench.host import can_drop_caches, machine_info  # noqa: E402
from bench.origins import ORIGINS, behind_latency  # noqa: E402
from bench.systems import SYSTEMS, CloudFS, Context, System, unmount_leftovers  # noqa: E402

BUCKET = "cold-cost"
SYSTEM_NAMES = ("cloudfs", "cloudfs-ro", "rclone", "s3fs")
STARTED = time.monotonic()


def log(message: str) -> None:
    print(f"[{(time.monotonic() - STARTED) / 60:5.1f} min] {message}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="fresh-mount passes per kind; medians")
    p.add_argument("--systems", default=",".join(SYSTEM_NAMES), help="comma-separated subset")
    p.add_argument("--large-mib", type=int, default=256, help="size of each of the 2 large files")
    p.add_argument("--small", type=int, default=2000, help="number of 110 KiB files")
    p.add_argument("--latency-ms", type=float, default=0.0, help="delay before every S3 request")
    p.add_argument("--origin", choices=sorted(ORIGINS), default="moto")
    p.add_argument(
        "--readahead-mode", choices=("stream", "ranges"), help="CloudFS's (default: its own)"
    )
    p.add_argument("--spy", choices=SPY_MODES, default="extra", help="when py-spy samples")
    p.add_argument("--spy-rate", type=int, default=250, help="py-spy samples per second")
    p.add_argument("--no-origin-row", action="store_true", help="skip boto3 straight to origin")
    p.add_argument("--pass-timeout", type=float, default=300.0)
    p.add_argument("--workdir", type=Path, default=Path("/var/tmp/cloudfs-cold-cost"))
    p.add_argument("--json", type=Path, help="write every pass and the medians here")
    p.add_argument("--report", type=Path, help="write the markdown tables here")
    p.add_argument("--check-gil", action="store_true", help="only check the GIL measure")
    return p.parse_args(argv)


def choose_systems(names: str, ctx: Context) -> tuple[list[System], dict[str, str]]:
    systems: list[System] = []
    skipped: dict[str, str] = {}
    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name not in SYSTEM_NAMES:
            sys.exit(f"cold_cost: unknown system {name!r}; one of {', '.join(SYSTEM_NAMES)}")
        system = SYSTEMS[name](ctx)
        why = system.available()
        if why:
            log(f"skipping {name}: {why}")
            skipped[name] = why
        else:
            systems.append(system)
    return systems, skipped


def memory_cache_mib() -> int | None:
    """CloudFS's --memory-cache-size in the benchmark's mounts, in MiB (for the RSS target)."""
    text = CloudFS.DEFAULTS.get("memory_cache_size", "")
    units = {"K": 1 / 1024, "M": 1, "G": 1024}
    if text[-1:].upper() in units and text[:-1].isdigit():
        return int(int(text[:-1]) * units[text[-1:].upper()])
    return None


def run(args: argparse.Namespace) -> dict[str, Any]:
    spec = dataset.DatasetSpec(
        large_count=2, large_size=args.large_mib * dataset.MiB,
        small_count=args.small, small_size=110 * dataset.KiB,
    )  # fmt: skip
    out: dict[str, Any] = {
        "command": " ".join(sys.argv), "machine": machine_info(REPO_ROOT),
        "dataset": spec.as_dict(),
        "origin": args.origin, "latency_ms": args.latency_ms, "spy": args.spy,
        "readahead_mode": args.readahead_mode, "spy_rate": args.spy_rate,
        "cloudfs_memory_cache_mib": memory_cache_mib(),
    }  # fmt: skip
    spy_dir = args.workdir / "spy"
    spy_dir.mkdir(parents=True)
    if args.spy != "off":
        out["gil_check"] = check_gil(spy_dir, args.spy_rate)
        log(f"GIL check: {[(c['case'], round(c['gil_s'], 3)) for c in out['gil_check']]}")
    with ORIGINS[args.origin]() as server:
        log(f"{server.name} at {server.endpoint}; writing {spec.describe()}")
        client = origin.client(server.endpoint, server.env)
        out["upload_s"] = dataset.create(spec, client, BUCKET, args.workdir / "local")
        if args.origin == "s3rver":  # its listings skip directories with no direct object
            keys = spec.large_keys() + spec.small_keys()
            out["listing_markers"] = s3rver.add_listing_markers(client, BUCKET, keys)
        with behind_latency(server, args.latency_ms) as front:
            if not args.no_origin_row:
                log(f"origin row: boto3 straight to {front.name}")
                out["origin_results"] = origin.measure(front.endpoint, front.env, BUCKET, spec)[
                    "results"
                ]
                log(f"  {out['origin_results']}")
            ctx = Context(
                args.workdir, front.endpoint, front.env, BUCKET, args.workdir / "local", REPO_ROOT
            )
            systems, out["skipped"] = choose_systems(args.systems, ctx)
            out["versions"] = {s.name: s.version() for s in systems}
            mode = {"readahead_mode": args.readahead_mode} if args.readahead_mode else {}
            runner = ColdCostRun(
                spec, front.pid, args.spy, args.spy_rate, spy_dir, args.pass_timeout, log, mode
            )
            try:
                for number in range(args.repeats):
                    log(f"repeat {number + 1} of {args.repeats}")
                    runner.repeat(systems, number)
            finally:
                out["passes"] = runner.records
                left = unmount_leftovers(args.workdir)
                if left:
                    out["left_mounted"] = left
    out["summary"] = coldcost_report.summarize(out["passes"], [s.name for s in systems])
    out["seconds"] = time.monotonic() - STARTED
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.check_gil:
        args.workdir.mkdir(parents=True, exist_ok=True)
        for case in check_gil(args.workdir, args.spy_rate):
            print(case)
        return 0
    if not can_drop_caches():
        sys.exit("cold_cost: cannot write /proc/sys/vm/drop_caches: run as root")
    if args.spy != "off" and shutil.which("py-spy") is None:
        sys.exit("cold_cost: py-spy not found (pip install py-spy), or pass --spy off")
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    try:
        result = run(args)
    finally:
        unmount_leftovers(args.workdir)
    text = coldcost_report.markdown(result)
    print(text)
    log(f"done in {result['seconds'] / 60:.1f} min")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(text)
    shutil.rmtree(args.workdir / "local", ignore_errors=True)  # 0.5 GiB of data set copy
    return 0


if __name__ == "__main__":
    sys.exit(main())
