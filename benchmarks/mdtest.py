"""mdtest-style metadata benchmark: create, stat, readdir, rename, unlink through real mounts.

For each tree configuration -- the embedded LMDB tree of a plain mount
(``embedded-lmdb``), the tree service over LMDB (``grpc-lmdb``), over a 3-member
etcd cluster on loopback (``grpc-etcd``), and two tree servers over one such etcd
with a mount of the same volume through each (``grpc-etcd-2``; the client
processes alternate between the two mounts) -- mounts a local directory, then
runs ``--procs`` client processes (1 and 8 by default), each working in its own
directories: ``--files`` files spread over ``--dirs`` directories per process,
for each file size in ``--size`` (bytes written by each create; 0 by default).
Phases, timed separately (wall clock of all processes together):

    create (open O_CREAT|O_EXCL, the write when --size > 0, close), stat,
    readdir (os.scandir of each directory, with d_type and one stat per entry),
    rename (within the directory), unlink

and prints ops/s per phase (medians of ``--repeats``, each on fresh servers and
mounts). ``--api`` also measures the tree-service API alone, without FUSE
(``bench/mdtestapi.py``: per-operation latency of ``GrpcMeta`` clients against one
tree server over LMDB and over etcd). ``--report`` saves the raw JSON under
``--results-dir`` and regenerates benchmarks/RESULTS-mdtest.md (its hand-written
part kept) with issue 27's targets; ``--report-only JSON`` regenerates from a saved run.

    python3 benchmarks/mdtest.py [--files 1000] [--dirs 10] [--procs 1,8] [--repeats 3]
    python3 benchmarks/mdtest.py --size 0,102400 --api --report benchmarks/RESULTS-mdtest.md
    python3 benchmarks/mdtest.py --configs none --api --api-ops 300   # the API alone
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO_ROOT)]

from bench import mdtestreport  # noqa: E402
from bench.host import machine_info  # noqa: E402
from bench.mdtestapi import (  # noqa: E402
    API_CONFIGS,
    API_PHASES,
    Summary,
    api_volume,
    etcd_engine,
    run_api,
)

from testkit.etcd import etcd_binary  # noqa: E402
from testkit.mounts import Backing, mounted  # noqa: E402
from testkit.tree_server import running_tree_server  # noqa: E402

PHASES = ("create", "stat", "readdir", "rename", "unlink")
CONFIGS = ("embedded-lmdb", "grpc-lmdb", "grpc-etcd", "grpc-etcd-2")
ETCD_CONFIGS = ("grpc-etcd", "grpc-etcd-2", "api-etcd")
PHASE_TIMEOUT = 1800.0  # how long a client waits for the others at a phase's barrier


def client(
    root: str, proc: int, files: int, dirs: int, size: int, barrier: Any, results: Any
) -> None:
    """One client process: every phase over its own directories, in step with the others."""
    try:
        results.put((proc, _phases(Path(root), proc, files, dirs, size, barrier), ""))
    except BaseException:  # reported to the parent, whatever it is
        barrier.abort()  # the others stop waiting for this one
        results.put((proc, {}, traceback.format_exc()))


def _phases(
    root: Path, proc: int, files: int, dirs: int, size: int, barrier: Any
) -> dict[str, float]:
    base = root / f"p{proc}"
    names = [(base / f"d{i % dirs}", f"f{i}") for i in range(files)]
    for d in {d for d, _ in names}:
        d.mkdir(parents=True, exist_ok=True)
    payload = os.urandom(size)
    times = {}
    for phase in PHASES:
        barrier.wait(PHASE_TIMEOUT)
        started = time.perf_counter()
        if phase == "create":
            for d, n in names:
                fd = os.open(d / n, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                try:
                    view = memoryview(payload)
                    while view:
                        view = view[os.write(fd, view) :]
                finally:
                    os.close(fd)
        elif phase == "stat":
            for d, n in names:
                os.stat(d / n)
        elif phase == "readdir":
            for d in sorted({d for d, _ in names}):
                with os.scandir(d) as it:
                    for entry in it:
                        entry.stat()
        elif phase == "rename":
            for d, n in names:
                os.rename(d / n, d / f"r{n}")
        else:
            for d, n in names:
                os.unlink(d / f"r{n}")
        times[phase] = time.perf_counter() - started
        barrier.wait(PHASE_TIMEOUT)
    return times


def run_clients(
    roots: list[Path], procs: int, files: int, dirs: int, size: int
) -> dict[str, float]:
    """Ops/s per phase: all processes' operations over the slowest process's time.

    Process ``p`` works through ``roots[p % len(roots)]`` (two mounts: alternately)."""
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    workers = [
        ctx.Process(
            target=client,
            args=(str(roots[p % len(roots)]), p, files, dirs, size, barrier, results),
        )
        for p in range(procs)
    ]
    for w in workers:
        w.start()
    got = []
    try:
        for _ in workers:
            proc, times, error = results.get(timeout=PHASE_TIMEOUT * len(PHASES))
            if error:
                raise RuntimeError(f"client {proc} failed:\n{error}")
            got.append(times)
    finally:
        for w in workers:
            w.join(timeout=60)
            if w.is_alive():
                w.kill()
                w.join(timeout=10)
    # every phase touches each of the procs * files names once (readdir: as an entry)
    return {ph: procs * files / max(times[ph] for times in got) for ph in PHASES}


@contextmanager
def configuration(name: str, work: Path) -> Iterator[list[Path]]:
    """Mounts of a local directory whose tree is of configuration ``name``; yields their
    roots (two for grpc-etcd-2: the same volume through each of two tree servers)."""
    data = work / f"ufs-{name}"
    data.mkdir(parents=True)
    with ExitStack() as stack:
        if name == "embedded-lmdb":
            uris = [f"file://{data}"]
        elif name == "grpc-lmdb":
            uris = [stack.enter_context(running_tree_server()).new_volume(f"file://{data}")]
        else:  # grpc-etcd(-2): a 3-member cluster, as for high availability
            engine = stack.enter_context(etcd_engine(work))
            servers = [stack.enter_context(running_tree_server(engine))]
            if name == "grpc-etcd-2":
                servers.append(stack.enter_context(running_tree_server(engine)))
            uri = servers[0].new_volume(f"file://{data}")
            # the same volume through each server (as tests/fuse/conftest.py's peer_uri)
            uris = [uri.replace(servers[0].address, s.address, 1) for s in servers]
        mounts = [
            stack.enter_context(mounted(Backing(uri=u, local_dir=data), ["--meta-ttl", "60"]))
            for u in uris
        ]
        yield [m.root for m in mounts]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--files", type=int, default=1000, help="files per process (1000)")
    parser.add_argument("--dirs", type=int, default=10, help="directories per process (10)")
    parser.add_argument("--procs", default="1,8", help="client process counts (1,8)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--configs",
        default=",".join(CONFIGS),
        help=f"FUSE configurations, of {','.join(CONFIGS)} ('none': only --api)",
    )
    parser.add_argument(
        "--size", default="0", help="bytes each create writes; a list runs each (0; 0,102400)"
    )
    parser.add_argument("--api", action="store_true", help="also the tree-service API alone")
    parser.add_argument("--api-ops", type=int, default=None, help="files per API client (--files)")
    parser.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    parser.add_argument(
        "--report", type=Path, default=None, help="save the raw JSON, regenerate this report"
    )
    parser.add_argument("--report-only", type=Path, metavar="JSON", help="regenerate from JSON")
    return parser.parse_args(argv)


def etcd_version() -> str | None:
    binary = etcd_binary()
    if binary is None:
        return None
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    return out.stdout.splitlines()[0].strip() if out.stdout else "?"


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every configuration, size and client count; the raw results (medians, and each run)."""
    started = time.monotonic()
    configs = [] if args.configs in ("", "none") else args.configs.split(",")
    apis = list(API_CONFIGS) if args.api else []
    version = etcd_version()
    if version is None:
        for name in [c for c in configs + apis if c in ETCD_CONFIGS]:
            print(f"no etcd binary (apt-get install etcd-server): skipping {name}")
            (configs if name in configs else apis).remove(name)
    procs_list = [int(p) for p in args.procs.split(",")]
    sizes = [int(s) for s in args.size.split(",")]
    api_ops = args.api_ops or args.files
    command = "python3 benchmarks/mdtest.py" + "".join(f" {shlex.quote(a)}" for a in sys.argv[1:])
    meta = {
        "command": command, "machine": machine_info(REPO_ROOT), "etcd": version,
        "files": args.files, "dirs": args.dirs, "procs": procs_list, "repeats": args.repeats,
        "sizes": sizes, "api_ops": api_ops if apis else None,
        "baseline": list(mdtestreport.BASELINE),
    }  # fmt: skip
    data: dict[str, Any] = {"meta": meta, "fuse": {}, "api": {}, "runs": {}}
    work = Path(tempfile.mkdtemp(prefix="cloudfs-mdtest-"))
    try:
        for name in configs:
            for size in sizes:
                for procs in procs_list:
                    place = work / f"{name}-{size}-{procs}"
                    runs = [
                        _fuse_run(name, place / str(r), procs, args.files, args.dirs, size)
                        for r in range(args.repeats)
                    ]
                    medians = {ph: statistics.median(r[ph] for r in runs) for ph in PHASES}
                    data["fuse"].setdefault(name, {}).setdefault(str(size), {})[str(procs)] = (
                        medians
                    )
                    data["runs"][f"{name}/{size}/{procs}"] = runs
                    shown = "  ".join(f"{ph} {medians[ph]:,.0f}/s" for ph in PHASES)
                    print(f"{name:13s} {size:>7d} B {procs} procs: {shown}", flush=True)
        for name in apis:
            for procs in procs_list:
                place = work / f"{name}-{procs}"
                api_runs = [
                    _api_run(name, place / str(r), procs, api_ops, args.dirs)
                    for r in range(args.repeats)
                ]
                summary = {
                    ph: {k: statistics.median(r[ph][k] for r in api_runs) for k in api_runs[0][ph]}
                    for ph in API_PHASES
                }
                data["api"].setdefault(name, {})[str(procs)] = summary
                data["runs"][f"{name}/{procs}"] = api_runs
                for ph in API_PHASES:
                    row = summary[ph]
                    print(
                        f"{name:9s} {procs} clients {ph:12s} {row['ops_s']:8,.0f}/s  "
                        f"median {row['p50_ms']:7.2f} ms  p99 {row['p99_ms']:7.2f} ms",
                        flush=True,
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        meta["wall_seconds"] = time.monotonic() - started
    return data


def _fuse_run(
    name: str, place: Path, procs: int, files: int, dirs: int, size: int
) -> dict[str, float]:
    with configuration(name, place) as roots:
        return run_clients(roots, procs, files, dirs, size)


def _api_run(name: str, place: Path, clients: int, ops: int, dirs: int) -> Summary:
    with api_volume(name, place) as (address, volume, ufs_root):
        return run_api(address, volume, ufs_root, clients, ops, dirs)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_only:
        json_path: Path = args.report_only
        data = json.loads(json_path.read_text())
    else:
        data = run(args)
        print(json.dumps({"fuse": data["fuse"], "api": data["api"]}))
        if not args.report:
            return 0
        args.results_dir.mkdir(parents=True, exist_ok=True)
        json_path = args.results_dir / f"mdtest-{time.strftime('%Y%m%d-%H%M')}.json"
        json_path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"raw results: {json_path}")
    report = args.report or BENCH_DIR / "RESULTS-mdtest.md"
    mdtestreport.write(data, report, json_path)
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
