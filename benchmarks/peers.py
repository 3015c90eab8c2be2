"""CloudFS against its peers (s3fs-fuse, rclone mount), local disk and the origin (issue 4).

CloudFS runs twice: read-write (``cloudfs``) and with ``--read-only`` (``cloudfs-ro``: dataset
mode, where the kernel serves warm files without open/flush/release; every one of its mounts
checks ``cloudfs stats --json`` says so, and its passes fail loudly otherwise).

Starts one moto S3 server on 127.0.0.1, writes the data set once (to the bucket and to a
local-disk directory), then, ``--repeats`` times: the origin's own ceiling (boto3), every
workload on every system (see bench/suite.py), and CloudFS's eviction experiment (see
bench/eviction.py). Raw results go to benchmarks/results/*.json after every system;
the medians, ratios and target verdicts to benchmarks/RESULTS.md.

    python3 benchmarks/peers.py                     # full data set, 3 repeats (~80 min)
    python3 benchmarks/peers.py --quick --repeats 1 # small data set, a shake-out run
    python3 benchmarks/peers.py --skip cloudfs-ro:large,cloudfs-ro:small-r1  # fewer passes
    python3 benchmarks/peers.py --report-only benchmarks/results/peers-....json

Needs root (FUSE mounts, drop_caches), fuse3, s3fs, rclone and torch; benchmarks/peers.sh
installs them first.
"""

from __future__ import annotations

import argparse
import importlib.util
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

from bench import dataset, eviction, origin, report  # noqa: E402
from bench.host import can_drop_caches, machine_info  # noqa: E402
from bench.suite import PHASES, SystemRun  # noqa: E402
from bench.systems import (  # noqa: E402
    SYSTEMS,
    CloudFS,
    CloudFSReadOnly,
    Context,
    System,
    unmount_leftovers,
)

from testkit.servers import running_s3_server  # noqa: E402

BUCKET = "peers-bench"
STARTED = time.monotonic()


def log(message: str) -> None:
    elapsed = time.monotonic() - STARTED
    print(f"[{elapsed / 60:6.1f} min] {message}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="runs of everything; medians (3)")
    p.add_argument("--quick", action="store_true", help="4 x 32 MiB and 500 small files")
    p.add_argument(
        "--systems",
        default="cloudfs,cloudfs-ro,s3fs,rclone,local",
        help="comma-separated subset of cloudfs,cloudfs-ro (read-only: dataset mode),s3fs,"
        "rclone,local",
    )
    p.add_argument(
        "--skip",
        default="",
        metavar="SYSTEM:PHASE,...",
        help="passes not to run: SYSTEM:PHASE or PHASE (every system); a phase name's start "
        f"selects every phase it begins ({', '.join(PHASES)}); e.g. cloudfs-ro:large",
    )
    p.add_argument("--no-eviction", action="store_true", help="skip the eviction experiment")
    p.add_argument("--no-dataloader", action="store_true", help="skip the DataLoader epochs")
    p.add_argument(
        "--pass-timeout", type=float, default=None, help="seconds a pass may take (600; 240 quick)"
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("/var/tmp/cloudfs-peers"),
        help="mountpoints, caches, the local-disk copy (emptied first, removed after)",
    )
    p.add_argument("--keep-workdir", action="store_true", help="leave the workdir (logs) behind")
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        help="RESULTS.md to write (benchmarks/RESULTS.md; results/RESULTS-quick.md with --quick)",
    )
    p.add_argument("--report-only", type=Path, metavar="JSON", help="only regenerate the report")
    return p.parse_args(argv)


def preflight(systems: list[System], dataloader: bool) -> tuple[list[System], dict[str, str]]:
    if not can_drop_caches():
        sys.exit("peers: cannot write /proc/sys/vm/drop_caches: run as root")
    if shutil.which("fusermount3") is None:
        sys.exit("peers: fusermount3 not found: apt-get install fuse3")
    skipped: dict[str, str] = {}
    ready: list[System] = []
    for system in systems:
        why = system.available()
        if why:
            log(f"skipping {system.name}: {why}")
            skipped[system.name] = why
        else:
            ready.append(system)
    if dataloader and importlib.util.find_spec("torch") is None:
        skipped["dataloader"] = "torch is not installed (pip install torch==2.13.0)"
        log(f"skipping the DataLoader epochs: {skipped['dataloader']}")
    return ready, skipped


def on_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parse_skip(text: str, names: list[str]) -> dict[str, frozenset[str]]:
    """``--skip`` as {system: phases}; exits on a system or phase that does not exist."""
    out: dict[str, set[str]] = {n: set() for n in names}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        system, _, prefix = item.rpartition(":")
        if system and system not in SYSTEMS:
            sys.exit(f"peers: --skip {item}: unknown system {system!r}")
        phases = {p for p in PHASES if p.startswith(prefix)}
        if not prefix or not phases:
            sys.exit(f"peers: --skip {item}: no phase starts {prefix!r}; phases: {PHASES}")
        for name in [system] if system else names:
            out.setdefault(name, set()).update(phases)
    return {k: frozenset(v) for k, v in out.items()}


def eviction_system(systems: list[System]) -> CloudFS | None:
    """The read-write CloudFS when it runs, else the read-only one."""
    cloudfs = [s for s in systems if isinstance(s, CloudFS)]
    cloudfs.sort(key=lambda s: isinstance(s, CloudFSReadOnly))
    return cloudfs[0] if cloudfs else None


def run(args: argparse.Namespace) -> Path:
    spec = dataset.DatasetSpec.quick() if args.quick else dataset.DatasetSpec.full()
    timeout = args.pass_timeout or (240.0 if args.quick else 600.0)
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        sys.exit(f"peers: unknown systems {unknown}; choose from {sorted(SYSTEMS)}")
    skip = parse_skip(args.skip, names)

    workdir: Path = args.workdir.resolve()
    unmount_leftovers(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    json_path = args.results_dir / f"peers-{stamp}{'-quick' if args.quick else ''}.json"
    command = "python3 benchmarks/peers.py" + "".join(" " + shlex.quote(a) for a in sys.argv[1:])
    data: dict[str, Any] = {
        "meta": {
            "command": command,
            "quick": args.quick,
            "repeats_requested": args.repeats,
            "dataset": spec.as_dict(),
            "dataset_text": spec.describe(),
            "machine": machine_info(REPO_ROOT),
            "pass_timeout_s": timeout,
            "cloudfs_options": CloudFS.DEFAULTS,
            "cloudfs_ro_flags": list(CloudFSReadOnly.FLAGS),
            "skip": {k: sorted(v) for k, v in skip.items() if v},
        },
        "repeats": [],
    }

    def save() -> None:
        data["meta"]["wall_seconds"] = time.monotonic() - STARTED
        json_path.write_text(json.dumps(data, indent=1) + "\n")

    try:
        with running_s3_server() as s3:
            log(f"moto S3 server at {s3.endpoint}; data set: {spec.describe()}")
            ctx = Context(
                workdir=workdir,
                endpoint=s3.endpoint,
                s3_env=s3.env(),
                bucket=BUCKET,
                local_root=workdir / "local",
                repo_root=REPO_ROOT,
            )
            systems = [SYSTEMS[n](ctx) for n in names]
            systems, skipped = preflight(systems, not args.no_dataloader)
            data["meta"]["skipped"] = skipped
            data["meta"]["versions"] = {s.name: s.version() for s in systems if s.is_fuse}
            secs = dataset.create(spec, s3.client(), BUCKET, ctx.local_root)
            data["meta"]["dataset_seconds"] = secs
            log(f"data set written in {secs:.0f} s")
            for index in range(args.repeats):
                rep: dict[str, Any] = {"index": index, "systems": {}}
                data["repeats"].append(rep)
                log(f"repeat {index + 1}/{args.repeats}: origin ceiling")
                rep["origin"] = origin.measure(s3.endpoint, s3.env(), BUCKET, spec)
                log(f"  origin: {fmt(rep['origin']['results'])}")
                shift = index % len(systems)  # rotate the order: no system always goes first
                for system in systems[shift:] + systems[:shift]:
                    log(f"repeat {index + 1}/{args.repeats}: {system.label}")
                    run_ = SystemRun(
                        system,
                        spec,
                        timeout,
                        log,
                        dataloader="dataloader" not in skipped,
                        skip=skip.get(system.name, frozenset()),
                    )
                    rep["systems"][system.name] = run_.run()
                    save()
                cloudfs = eviction_system(systems)
                if cloudfs is not None and not args.no_eviction:
                    log(f"repeat {index + 1}/{args.repeats}: CloudFS eviction experiment")
                    rep["eviction"] = eviction.run(cloudfs, spec, timeout, log)
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


def fmt(results: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:,.0f}" for k, v in results.items() if isinstance(v, float))


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
        args.results_dir / "RESULTS-quick.md" if quick else BENCH_DIR / "RESULTS.md"
    )
    report.write(data, target, json_path)
    log(f"report: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
