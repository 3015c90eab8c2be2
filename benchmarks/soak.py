"""Soak under faults: reads from two mounts and write-back checkpoints while S3, the tree
service, etcd, a cache worker and a cache disk fail in turn (bounded, loopback only).

Topology (bench/soak/topology.py): moto on 127.0.0.1 behind the fault proxy; a 3-member
etcd; ``cloudfs meta serve --engine etcd://...``; two ``cloudfs cache serve --group``
workers; three ``grpc://`` mounts with ``--cache-group``: the writer with ``--write-mode
back``, the reader with its cache on a small tmpfs, and a ``--read-only --dataset-mode
on`` mount. Workload (bench/soak/workload.py):
two reader threads per mount, epochs in random order over small and large files, each
checked by crc32; one writer, a checkpoint of 1-4 MiB every few seconds (fsync, close,
then ``latest.tmp`` renamed over ``latest.bin``). Faults (bench/soak/faults.py), one
after another: S3 errors, S3 stalls, an S3 outage of min(2 min, duration/6), the tree
service down for min(5 min, duration/6) (``--tree-outage``; reads of files a mount read
before must all succeed), the etcd leader killed, a cache worker killed, the reader's
cache disk filled.

At the end: ``cloudfs flush`` on the writer, then every closed checkpoint is compared
with its object read straight from moto (not through the proxy): bytes lost. The JSON
report has operations, failures (each allowed by a fault or not), bytes lost, the mounts'
RSS and fds over time with a flatness verdict, and recovery times; the exit status is 1
when bytes were lost, a failure was not allowed, memory grew or a fault was not survived.

    python3 benchmarks/soak.py                                   # 30 minutes
    python3 benchmarks/soak.py --duration 3m --report /tmp/soak.json
    python3 benchmarks/soak.py --duration 15m --tree-outage 300   # the 5-minute outage

Needs root (FUSE, tmpfs), fuse3, etcd and moto.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO_ROOT)]

from bench.host import machine_info  # noqa: E402
from bench.soak import faults, memory, report  # noqa: E402
from bench.soak.topology import BUCKET, Topology, running_topology  # noqa: E402
from bench.soak.workload import (  # noqa: E402
    Checkpoints,
    Dataset,
    OpLog,
    reader_loop,
    writer_loop,
)
from bench.systems import unmount_leftovers  # noqa: E402

from testkit.etcd import etcd_binary  # noqa: E402

STARTED = time.monotonic()
DATASET = Dataset(small=400, small_size=96 << 10, large=6, large_size=24 << 20)  # ~181 MiB
READERS_PER_MOUNT = 2
CHECKPOINT_SIZES = (1 << 20, 4 << 20)
JOIN_TIMEOUT = 60.0


def log(message: str) -> None:
    print(f"[{(time.monotonic() - STARTED) / 60:6.1f} min] {message}", flush=True)


def parse_seconds(text: str) -> float:
    """``30m``, ``180s``, ``1h`` or plain seconds (more than 0)."""
    units = {"s": 1, "m": 60, "h": 3600}
    scale = units.get(text[-1:].lower(), 1)
    number = text[:-1] if text[-1:].lower() in units else text
    try:
        seconds = float(number) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (30m, 180s, 1h)") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: not more than 0")
    return seconds


def parse_duration(text: str) -> float:
    """The soak's length: ``parse_seconds``, at least a minute."""
    seconds = parse_seconds(text)
    if seconds < 60:
        raise argparse.ArgumentTypeError("the soak needs at least 1 minute")
    return seconds


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--duration", type=parse_duration, default=1800.0, help="30m, 180s (30m)")
    p.add_argument("--report", type=Path, help="JSON report (default: results/soak-STAMP.json)")
    p.add_argument("--workdir", type=Path, default=Path("/var/tmp/cloudfs-soak"))
    p.add_argument("--keep-workdir", action="store_true", help="keep logs and caches")
    p.add_argument(
        "--tree-outage",
        type=parse_seconds,
        default=None,
        help="how long the tree service is down (min(5m, duration/6))",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--flush-timeout", type=float, default=600.0)
    p.add_argument("--markdown", type=Path, metavar="JSON", help="print a report's RESULTS section")
    return p.parse_args(argv)


def missing() -> str | None:
    """Why the soak cannot run here (None: it can)."""
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        return "needs root and /dev/fuse"
    if shutil.which("fusermount3") is None:
        return "needs fusermount3 (apt-get install fuse3)"
    if etcd_binary() is None:
        return "needs etcd (apt-get install etcd-server)"
    return None


def flush(topo: Topology, timeout: float) -> dict[str, Any]:
    start = time.monotonic()
    cmd = [sys.executable, "-m", "cloudfs.cli.main", "flush", "-q", str(topo.writer.root)]
    result = subprocess.run(
        [*cmd, "--timeout", str(timeout)],
        capture_output=True,
        text=True,
        timeout=timeout + 60,
        check=False,
    )
    return {
        "rc": result.returncode,
        "seconds": time.monotonic() - start,
        "output": (result.stdout + result.stderr).strip()[-2000:],
    }


def soak(args: argparse.Namespace, topo: Topology, data: dict[str, Any]) -> None:
    """Run the workload and the faults for ``args.duration``; fill ``data``."""
    log(f"data set: {DATASET.total_bytes / 2**20:.0f} MiB in {len(DATASET.keys())} files")
    # One client: boto3 clients are thread-safe to use, not to create.
    client = topo.s3.client()  # type: ignore[no-untyped-call]
    crcs = DATASET.populate(lambda k, b: client.put_object(Bucket=BUCKET, Key=k, Body=b), args.seed)
    (topo.writer.root / "ckpt").mkdir(exist_ok=True)
    duration: float = args.duration
    windows, scaling = faults.plan(duration, args.tree_outage)
    data["meta"]["scaling"] = scaling
    oplog = OpLog(time.monotonic())
    pids = {name: topo.mount_pid(name) for name in topo.mounts}
    sampler = memory.Sampler(
        {k: v for k, v in pids.items() if v is not None}, min(5.0, duration / 60), oplog.now
    )
    stop = threading.Event()
    ckpts = Checkpoints()
    threads = [
        threading.Thread(
            target=reader_loop,
            args=(oplog, name, m.root, crcs, args.seed * 100 + i, stop),
            name=f"read-{name}-{i}",
            daemon=True,
        )
        for name, m in topo.mounts.items()
        for i in range(READERS_PER_MOUNT)
    ]
    interval = min(10.0, duration / 36)
    data["meta"]["checkpoint_interval_s"] = interval  # what bounds a write's recovery time
    threads.append(
        threading.Thread(
            target=writer_loop,
            args=(oplog, topo.writer.root, ckpts, interval, CHECKPOINT_SIZES, args.seed, stop),
            name="writer",
            daemon=True,
        )
    )
    runner = faults.FaultRunner(topo, windows, oplog.now)
    sampler.start()
    for t in threads:
        t.start()
    runner.start()
    log(f"soak running for {duration:.0f} s; pids {pids}; faults: {scaling['note']}")
    try:
        while (left := duration - oplog.now()) > 0:
            time.sleep(min(left, 30.0))
            ops = oplog.snapshot()
            log(f"  {len(ops)} ops, {sum(not o.ok for o in ops)} failed")
    finally:
        stop.set()
        runner.stop()
        deadline = time.monotonic() + JOIN_TIMEOUT
        for t in threads:
            t.join(max(0.1, deadline - time.monotonic()))
        sampler.stop()
    data["hung_threads"] = [t.name for t in threads if t.is_alive()]
    ops = oplog.snapshot()
    log("flushing the writer mount")
    data["flush"] = flush(topo, args.flush_timeout)
    log(f"flush: rc {data['flush']['rc']} in {data['flush']['seconds']:.1f} s; verifying")
    direct = topo.s3.client()  # type: ignore[no-untyped-call]  # moto itself, not the proxy
    data["verify"] = report.bytes_lost(direct, BUCKET, ckpts.snapshot())
    data["ops"] = report.operations(ops, windows)
    data["faults"] = faults.as_dicts(windows)
    data["recovery"] = faults.recovery(windows, ops)
    warmup = float(scaling["warmup_s"])
    data["memory"] = {
        name: memory.flatness(samples, warmup) for name, samples in sampler.samples.items()
    }
    data["samples"] = {
        name: [[round(s.t, 1), round(s.rss_mib, 1), s.fds] for s in samples]
        for name, samples in sampler.samples.items()
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown:
        saved = json.loads(args.markdown.read_text())
        print(report.markdown(saved, os.path.relpath(args.markdown, REPO_ROOT)), end="")
        return 0
    why = missing()
    if why:
        print(f"soak: {why}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target: Path = args.report or BENCH_DIR / "results" / f"soak-{stamp}.json"
    workdir: Path = args.workdir.resolve()
    unmount_leftovers(workdir)
    subprocess.run(["umount", "-l", str(workdir / "cache-reader")], capture_output=True)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    command = "python3 benchmarks/soak.py" + "".join(" " + shlex.quote(a) for a in sys.argv[1:])
    data: dict[str, Any] = {
        "meta": {
            "command": command,
            "duration_s": args.duration,
            "dataset": vars(DATASET) | {"total_bytes": DATASET.total_bytes},
            "readers_per_mount": READERS_PER_MOUNT,
            "checkpoint_sizes": CHECKPOINT_SIZES,
            "machine": machine_info(REPO_ROOT),
        }
    }
    try:
        with running_topology(workdir, log) as topo:
            soak(args, topo, data)
            log("unmounting")
    except KeyboardInterrupt as e:  # SIGTERM, SIGHUP, ^C: say so, keep what there is
        data["interrupted"] = str(e) or "KeyboardInterrupt"
    finally:
        left = unmount_leftovers(workdir)
        if left:
            log(f"lazily unmounted leftovers: {left}")
        if not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    data["meta"]["wall_s"] = round(time.monotonic() - STARTED, 1)
    interrupted = "interrupted" in data or "verify" not in data
    data["verdict"] = [f"interrupted: {data.get('interrupted')}"] if interrupted else []
    data["verdict"] = data["verdict"] or report.verdict(data)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=1) + "\n")
    print(data["verdict"][0] if interrupted else report.summary(data), flush=True)
    log(f"report: {target}")
    return 1 if data["verdict"] else 0


def on_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
