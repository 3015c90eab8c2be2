"""Announced epoch orders vs none: a PyTorch DataLoader over CloudFS (issue: epoch hints).

Starts one moto S3 server on 127.0.0.1 and a TCP proxy in front of it that waits 20 ms
before each request (``--delay-ms``); writes the data set (5,000 files of 110 KiB in
10 directories) straight to the server; every mount reads through the proxy. Each run
is a fresh ``--read-only`` mount (dataset mode) with an empty cache directory,
``--memory-cache-size 32M`` (so the disk tier is what is measured) and ``--block-size 1M``
(a file is one block), and one DataLoader (batch 32, CPU only; each item opens and reads
its whole file) in a child process; the kernel's caches are dropped before every epoch
(the data set stands for one larger than RAM). Per repeat (bench/epochsuite.py):

1. epoch 1, cold, disk cache twice the data set: a seeded shuffle with no announcement
   vs the same order announced (``CloudFSSampler``), num_workers 0 and 4; and the
   origin's own rate: 16 boto3 threads GETting the objects through the same proxy;
2. disk cache half the data set (``--free-space-ratio 0``), 3 epochs, a new shuffle
   each: announced (Belady eviction) vs no announcement under ``--cache-policy lru``
   and under tinylfu (the default);
3. the same half cache with ``CloudFSSampler(cache_first=True)``;
4. (from 2 and 3) the cached fraction the mount predicts when an epoch is announced,
   against the hit ratio then measured in that epoch.

Raw results go to benchmarks/results/epochs-*.json after every run; medians, the exact
command and met/missed against the issue's targets to benchmarks/RESULTS-epochs.md.

    python3 benchmarks/epochs.py                      # 5,000 files, 3 repeats
    python3 benchmarks/epochs.py --quick --repeats 1  # 1,000 files: a shake-out
    python3 benchmarks/epochs.py --report-only benchmarks/results/epochs-....json

Needs root (FUSE mounts, drop_caches), fuse3, torch (CPU) and moto.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import shutil
import signal
import statistics
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO_ROOT)]

from bench import epochreport  # noqa: E402
from bench.epochsuite import EpochRun, EpochSpec, origin_rate, populate, runs  # noqa: E402
from bench.host import can_drop_caches, machine_info  # noqa: E402
from bench.systems import CloudFSReadOnly, Context, unmount_leftovers  # noqa: E402

from testkit.faults_proxy import running_proxy  # noqa: E402
from testkit.servers import running_s3_server  # noqa: E402

BUCKET = "epochs-bench"
STARTED = time.monotonic()


def log(message: str) -> None:
    elapsed = time.monotonic() - STARTED
    print(f"[{elapsed / 60:6.1f} min] {message}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="runs of everything; medians (3)")
    p.add_argument("--quick", action="store_true", help="1,000 files: a shake-out")
    p.add_argument("--delay-ms", type=float, default=20.0, help="proxy delay per request (20)")
    p.add_argument(
        "--runs",
        default=None,
        help="comma-separated subset of the runs (cold-w0-plain, ..., half-cache-first)",
    )
    p.add_argument(
        "--plain-w0-files",
        type=int,
        default=None,
        help="files after which the cold num_workers 0 epoch without announcements stops "
        "(its rate is steady: every file is one GET in turn); 0: the whole epoch "
        "(1,000 full; 0 quick)",
    )
    p.add_argument(
        "--mount-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another `cloudfs mount` option for every run, e.g. order-window-size=64M "
        "(repeatable; for experiments: the report lists them)",
    )
    p.add_argument("--epoch-timeout", type=float, default=600.0, help="seconds an epoch may take")
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("/var/tmp/cloudfs-epochs"),
        help="mountpoints, caches, logs (emptied first, removed after)",
    )
    p.add_argument("--keep-workdir", action="store_true", help="leave the workdir (logs) behind")
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        help="report to write (benchmarks/RESULTS-epochs.md; "
        "results/RESULTS-epochs-quick.md with --quick)",
    )
    p.add_argument("--report-only", type=Path, metavar="JSON", help="only regenerate the report")
    return p.parse_args(argv)


def on_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace) -> Path:
    spec = EpochSpec.quick() if args.quick else EpochSpec.full()
    if args.plain_w0_files is not None:
        spec = dataclasses.replace(spec, plain_w0_max_files=args.plain_w0_files or None)
    extra = []
    for item in args.mount_option:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            sys.exit(f"epochs: --mount-option wants NAME=VALUE, not {item!r}")
        extra.append((name.strip().lstrip("-").replace("-", "_"), value))
    if extra:
        spec = dataclasses.replace(spec, extra_options=tuple(extra))
    plan = runs(spec)
    if args.runs:
        wanted = [n.strip() for n in args.runs.split(",") if n.strip()]
        unknown = sorted(set(wanted) - {r.name for r in plan})
        if unknown:
            sys.exit(f"epochs: unknown runs {unknown}; choose from {[r.name for r in plan]}")
        plan = [r for r in plan if r.name in wanted]
    if not can_drop_caches():
        sys.exit("epochs: cannot write /proc/sys/vm/drop_caches: run as root")
    if shutil.which("fusermount3") is None:
        sys.exit("epochs: fusermount3 not found: apt-get install fuse3")

    workdir: Path = args.workdir.resolve()
    unmount_leftovers(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    json_path = args.results_dir / f"epochs-{stamp}{'-quick' if args.quick else ''}.json"
    command = "python3 benchmarks/epochs.py" + "".join(" " + shlex.quote(a) for a in sys.argv[1:])
    data: dict[str, Any] = {
        "meta": {
            "command": command,
            "quick": args.quick,
            "repeats_requested": args.repeats,
            "spec": spec.as_dict(),
            "workload_text": spec.describe(),
            "delay_ms": args.delay_ms,
            "machine": machine_info(REPO_ROOT),
            "runs": [dataclasses.asdict(r) | {"label": r.label()} for r in plan],
        },
        "repeats": [],
    }

    def save() -> None:
        data["meta"]["wall_seconds"] = time.monotonic() - STARTED
        json_path.write_text(json.dumps(data, indent=1) + "\n")

    try:
        with running_s3_server() as s3, running_proxy(s3.endpoint) as proxy:
            proxy.delay = args.delay_ms / 1000
            client = s3.client()
            log(f"moto at {s3.endpoint}, behind a {args.delay_ms:g} ms proxy at {proxy.endpoint}")
            log(f"writing the data set: {spec.describe()}")
            data["meta"]["populate_s"] = populate(spec, client, BUCKET)
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
                sys.exit(f"epochs: {why}")
            data["meta"]["cloudfs_version"] = system.version()
            save()
            for index in range(args.repeats):
                rep: dict[str, Any] = {"index": index, "runs": {}}
                data["repeats"].append(rep)
                log(f"repeat {index + 1}/{args.repeats}: origin, 16 threads")
                rep["origin"] = origin_rate(
                    proxy.endpoint, env, BUCKET, spec.keys(), moto_pid=s3.proc.pid
                )
                log(
                    f"  origin: {rep['origin']['files_s']:.0f} files/s, CPU "
                    f"{rep['origin']['cpu_busy']:.0%} of the machine"
                )
                shift = index % 2  # alternate which of a pair goes first
                order = _rotate_pairs(plan, shift)
                for r in order:
                    log(f"repeat {index + 1}/{args.repeats}: {r.name} ({r.label()})")
                    result = EpochRun(
                        ctx, spec, r, proxy, args.epoch_timeout, log, moto_pid=s3.proc.pid
                    ).execute()
                    rep["runs"][r.name] = dataclasses.asdict(result)
                    save()
                _log_repeat(rep)
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


def _rotate_pairs(plan: list[Any], shift: int) -> list[Any]:
    """Within each scenario, start from a different run each repeat (no run always first)."""
    out: list[Any] = []
    for scenario in sorted({r.scenario for r in plan}):
        group = [r for r in plan if r.scenario == scenario]
        k = shift % len(group)
        out += group[k:] + group[:k]
    return out


def _log_repeat(rep: dict[str, Any]) -> None:
    secs = {
        name: statistics.fmean(e["seconds"] for e in r["epochs"][1:]) if len(r["epochs"]) > 1
        else None
        for name, r in rep["runs"].items()
    }  # fmt: skip
    done = {k: round(v, 1) for k, v in secs.items() if v is not None}
    if done:
        log(f"  epochs 2-3 mean seconds: {done}")


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
        args.results_dir / "RESULTS-epochs-quick.md" if quick else BENCH_DIR / "RESULTS-epochs.md"
    )
    epochreport.write(data, target, json_path)
    log(f"report: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
