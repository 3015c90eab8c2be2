"""Reading without FUSE (issue 16): cloudfs:// fsspec and the S3 gateway beside the mount,
local disk, s3fs and boto3 straight to the origin.

Starts one moto S3 server on 127.0.0.1, a TCP proxy in front of it that waits 20 ms before
each request (``--delay-ms``) and counts every byte the origin sends, and a tree service
(``cloudfs meta serve``) with the bucket as one volume. Writes the data set (8 x 64 MiB
and 2,000 x 100 KiB; bench/nofusespec.py) to the bucket and to a local directory. Then, for
every system (bench/nofusesystems.py) and every pass (the large files with 1 and with 4
readers, the small files with 8), a fresh system reads every file cold, then again warm;
each file's crc32 is checked. Measured: MiB/s, files/s, what the origin sent as a
multiple of the data set.

Raw results go to benchmarks/results/without-fuse-*.json after every system; medians and
ratios against local disk to benchmarks/RESULTS-without-fuse.md.

    python3 benchmarks/without_fuse.py                # 3 repeats
    python3 benchmarks/without_fuse.py --quick        # 4 x 16 MiB + 200 files, 1 repeat
    python3 benchmarks/without_fuse.py --report-only benchmarks/results/without-fuse-....json

Needs root (FUSE mounts, drop_caches), fuse3, moto, and s3fs in its own virtual
environment (``python3 -m venv /opt/cloudfs-bench-s3fs && /opt/cloudfs-bench-s3fs/bin/pip
install s3fs``: s3fs pins botocore, which the main environment's boto3 must not see).
"""

from __future__ import annotations

import argparse
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

from bench import nofusereport  # noqa: E402
from bench.host import can_drop_caches, machine_info  # noqa: E402
from bench.nofusespec import NoFuseSpec, populate  # noqa: E402
from bench.nofusesuite import measure_system  # noqa: E402
from bench.nofusesystems import (  # noqa: E402
    S3FS_PYTHON,
    World,
    all_systems,
    s3fs_version,
)
from bench.systems import Context, unmount_leftovers  # noqa: E402

from testkit.faults_proxy import running_proxy  # noqa: E402
from testkit.servers import running_s3_server  # noqa: E402
from testkit.tree_server import running_tree_server  # noqa: E402

BUCKET = "nofuse-bench"
STARTED = time.monotonic()


def log(message: str) -> None:
    elapsed = time.monotonic() - STARTED
    print(f"[{elapsed / 60:6.1f} min] {message}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=None, help="runs of every system (3; quick 1)")
    p.add_argument("--quick", action="store_true", help="4 x 16 MiB + 200 files: a shake-out")
    p.add_argument("--delay-ms", type=float, default=20.0, help="proxy delay per request (20)")
    p.add_argument("--systems", default="", help="comma-separated names to run (default: all)")
    p.add_argument(
        "--local-mount",
        choices=("on", "off"),
        default="on",
        help="also fsspec via a local mount (on)",
    )
    p.add_argument("--gateway-s3fs", action="store_true", help="also s3fs through the gateway")
    p.add_argument("--s3fs-python", default=S3FS_PYTHON, help="the s3fs venv's interpreter")
    p.add_argument("--pass-timeout", type=float, default=600.0, help="seconds a pass may take")
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("/var/tmp/cloudfs-without-fuse"),
        help="local copy, mountpoints, caches, logs (emptied first, removed after)",
    )
    p.add_argument("--keep-workdir", action="store_true", help="leave the workdir (logs) behind")
    p.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    p.add_argument("--report", type=Path, default=None, help="report to write")
    p.add_argument("--report-only", type=Path, metavar="JSON", help="only regenerate the report")
    return p.parse_args(argv)


def on_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def prime_tree(tree: str, volume: str, endpoint: str) -> int:
    """List the whole volume once, so every system finds the tree service's listing made."""
    from cloudfs.fsspec import CloudFileSystem

    fs = CloudFileSystem(meta_server=tree, s3_endpoint=endpoint, skip_instance_cache=True)
    return len(fs.find(volume))


def run(args: argparse.Namespace) -> Path:
    spec = NoFuseSpec.quick() if args.quick else NoFuseSpec.full()
    repeats = args.repeats or (1 if args.quick else 3)
    if not can_drop_caches():
        sys.exit("without_fuse: cannot write /proc/sys/vm/drop_caches: run as root")
    if shutil.which("fusermount3") is None:
        sys.exit("without_fuse: fusermount3 not found: apt-get install fuse3")
    workdir: Path = args.workdir.resolve()
    unmount_leftovers(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    suffix = "-quick" if args.quick else ""
    json_path: Path = args.results_dir / f"without-fuse-{stamp}{suffix}.json"
    command = "python3 benchmarks/without_fuse.py" + "".join(
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
            "s3fs_version": s3fs_version(args.s3fs_python),
            "systems": {},
            "skipped": {},
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
            local_root = workdir / "local"
            data["meta"]["populate_s"], crcs = populate(spec, s3.client(), BUCKET, local_root)
            with running_tree_server(env=s3.env(), log_path=workdir / "tree.log") as tree:
                uri = tree.new_volume(f"s3://{BUCKET}", meta_ttl=3600.0)
                volume = uri.rsplit("/", 1)[1]
                log(f"tree service at {tree.address}, volume {uri}")
                env = s3.env()
                env["AWS_ENDPOINT_URL_S3"] = proxy.endpoint
                ctx = Context(
                    workdir=workdir, endpoint=proxy.endpoint, s3_env=env, bucket=BUCKET,
                    local_root=local_root, repo_root=REPO_ROOT,
                )  # fmt: skip
                world = World(ctx, tree.address, volume, args.pass_timeout, args.s3fs_python)
                data["meta"]["listed_files"] = prime_tree(tree.address, volume, proxy.endpoint)
                systems = pick(args, world, data)
                save()
                for index in range(repeats):
                    rep: dict[str, Any] = {"index": index, "systems": {}}
                    data["repeats"].append(rep)
                    shift = index % len(systems)  # each repeat starts with another system
                    for system in systems[shift:] + systems[:shift]:
                        log(f"repeat {index + 1}/{repeats}: {system.label}")
                        rep["systems"][system.name] = measure_system(system, spec, proxy, crcs, log)
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


def pick(args: argparse.Namespace, world: World, data: dict[str, Any]) -> list[Any]:
    """The systems to run (available ones, of those asked for); the rest noted as skipped."""
    local_mount = args.local_mount == "on"
    wanted = {s for s in args.systems.split(",") if s}
    chosen = []
    for system in all_systems(world, local_mount, args.gateway_s3fs):
        if wanted and system.name not in wanted:
            continue
        why = system.available()
        if why:
            log(f"skipping {system.label}: {why}")
            data["meta"]["skipped"][system.name] = why
            continue
        data["meta"]["systems"][system.name] = {"label": system.label, "how": system.how}
        chosen.append(system)
    if not chosen:
        sys.exit("without_fuse: no system to run")
    return chosen


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    json_path = args.report_only or run(args)
    data = json.loads(json_path.read_text())
    quick = bool(data["meta"].get("quick"))
    target = args.report or (
        args.results_dir / "RESULTS-without-fuse-quick.md"
        if quick
        else BENCH_DIR / "RESULTS-without-fuse.md"
    )
    nofusereport.write(data, target, json_path)
    log(f"report: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
