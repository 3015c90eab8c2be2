"""mdtest-style metadata benchmark: create, stat, readdir, rename, unlink through real mounts.

For each tree configuration -- the embedded LMDB tree of a plain mount, the
tree service over LMDB (``grpc://`` mount), and the tree service over a
3-member etcd cluster on loopback when an ``etcd`` binary is installed --
mounts a local directory, then runs ``--procs`` client processes (1 and 8 by
default), each working in its own directories: ``--files`` files spread over
``--dirs`` directories per process.
Phases, timed separately (wall clock of all processes together):

    create (open O_CREAT|O_EXCL + close), stat, readdir (os.scandir of each
    directory, with d_type and one stat per entry), rename (within the
    directory), unlink

and prints ops/s per phase; ``--report`` appends a Markdown table with the
command line to benchmarks/RESULTS-mdtest.md.

    python3 benchmarks/mdtest.py [--files 1000] [--dirs 10] [--procs 1,8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testkit.etcd import running_etcd
from testkit.mounts import Backing, mounted
from testkit.tree_server import running_tree_server

PHASES = ("create", "stat", "readdir", "rename", "unlink")


def client(root: str, proc: int, files: int, dirs: int, barrier, results) -> None:  # type: ignore[no-untyped-def]
    """One client process: every phase over its own directories, in step with the others."""
    base = Path(root) / f"p{proc}"
    names = [(base / f"d{i % dirs}", f"f{i}") for i in range(files)]
    for d in {d for d, _ in names}:
        d.mkdir(parents=True, exist_ok=True)
    times = {}
    for phase in PHASES:
        barrier.wait()
        started = time.perf_counter()
        if phase == "create":
            for d, n in names:
                os.close(os.open(d / n, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
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
        barrier.wait()
    results.put((proc, times))


def run_clients(root: Path, procs: int, files: int, dirs: int) -> dict[str, float]:
    """Ops/s per phase: all processes' operations over the slowest process's time."""
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    workers = [
        ctx.Process(target=client, args=(str(root), p, files, dirs, barrier, results))
        for p in range(procs)
    ]
    for w in workers:
        w.start()
    got = [results.get(timeout=1800) for _ in workers]
    for w in workers:
        w.join(timeout=60)
    # every phase touches each of the procs * files names once (readdir: as an entry)
    return {ph: procs * files / max(times[ph] for _, times in got) for ph in PHASES}


@contextmanager
def configuration(name: str, work: Path) -> Iterator[Path]:
    """A mounted local directory whose tree is of configuration ``name``; yields its root."""
    data = work / f"ufs-{name}"
    data.mkdir(parents=True)
    with ExitStack() as stack:
        if name == "embedded-lmdb":
            uri = f"file://{data}"
        elif name == "grpc-lmdb":
            uri = stack.enter_context(running_tree_server()).new_volume(f"file://{data}")
        else:  # grpc-etcd: a 3-member cluster, as for high availability
            (work / "etcd").mkdir()
            etcd = stack.enter_context(running_etcd(work / "etcd", members=3, in_memory=False))
            hosts = ",".join(e.removeprefix("http://") for e in etcd.endpoints)
            server = stack.enter_context(running_tree_server(f"etcd://{hosts}/mdtest"))
            uri = server.new_volume(f"file://{data}")
        backing = Backing(uri=uri, local_dir=data)
        mount = stack.enter_context(mounted(backing, ["--meta-ttl", "60"]))
        yield mount.root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000, help="files per process (1000)")
    parser.add_argument("--dirs", type=int, default=10, help="directories per process (10)")
    parser.add_argument("--procs", default="1,8", help="client process counts (1,8)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--configs", default="embedded-lmdb,grpc-lmdb,grpc-etcd")
    parser.add_argument("--report", default=None, help="append a Markdown table to this file")
    args = parser.parse_args()
    configs = args.configs.split(",")
    if "grpc-etcd" in configs and shutil.which("etcd") is None:
        print("no etcd binary (apt-get install etcd-server): skipping grpc-etcd")
        configs.remove("grpc-etcd")
    results: dict[str, dict[int, dict[str, float]]] = {}
    work = Path(tempfile.mkdtemp(prefix="cloudfs-mdtest-"))
    try:
        for name in configs:
            results[name] = {}
            for procs in (int(p) for p in args.procs.split(",")):
                runs = []
                for repeat in range(args.repeats):
                    with configuration(name, work / f"{name}-{procs}-{repeat}") as root:
                        runs.append(run_clients(root, procs, args.files, args.dirs))
                medians = {ph: statistics.median(r[ph] for r in runs) for ph in PHASES}
                results[name][procs] = medians
                shown = "  ".join(f"{ph} {medians[ph]:,.0f}/s" for ph in PHASES)
                print(f"{name:14s} {procs} procs: {shown}", flush=True)
    finally:
        subprocess.run(["sh", "-c", f"fusermount3 -u -z {work}/*/mnt* 2>/dev/null"], check=False)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results))
    if args.report:
        write_report(Path(args.report), results, args)
    return 0


def write_report(path: Path, results: dict[str, dict[int, dict[str, float]]], args) -> None:  # type: ignore[no-untyped-def]
    command = "python3 benchmarks/mdtest.py " + " ".join(sys.argv[1:])
    lines = [
        f"\n## mdtest-style metadata run, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n",
        f"Command: `{command}`; {args.files} files in {args.dirs} directories per process, "
        f"medians of {args.repeats}; ops/s (readdir: entries/s, each with a stat).\n",
        "| tree | procs | " + " | ".join(PHASES) + " |",
        "|---|---:|" + "---:|" * len(PHASES),
    ]
    for name, by_procs in results.items():
        for procs, rates in by_procs.items():
            lines.append(
                f"| {name} | {procs} | " + " | ".join(f"{rates[ph]:,.0f}" for ph in PHASES) + " |"
            )
    with path.open("a") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
