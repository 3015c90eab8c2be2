"""What one FUSE request costs the mount process, and what the kernel spares it.

Mounts a local directory of small files (5,000 x 110 KiB by default) twice in
turn, read-write and read-only (dataset mode), reads every file with 8 threads
(open, read to the end, close) for a few warm passes, and reports per mode:
files/s, the FUSE requests per file that reached the mount, and the mount
process's CPU time per request (user + system, from /proc), with the local
disk's files/s from the same run as the limit. ``--buffered`` opens files as
most loaders do (``open(p, "rb")``, whose ``isatty()`` the kernel forwards as
FUSE_IOCTL), and the ioctls the patched pyfuse3 answers in C are counted apart.
With ``--profile``, py-spy samples the mount during the warm passes and the
hottest functions are printed (the per-request cost, by where it goes).

    python3 benchmarks/request_cost.py [--files 5000] [--passes 3] [--readers 8]
        [--buffered] [--profile]

Loopback only: the UFS is a local directory; nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CLOUDFS = [sys.executable, "-m", "cloudfs.cli.main"]
READERS = 8
SIZE = 110 * 1024


def make_dataset(root: Path, files: int) -> list[str]:
    names = []
    for i in range(files):
        d = root / f"d{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{i:05d}.jpg").write_bytes(os.urandom(SIZE))
        names.append(f"d{i % 10}/{i:05d}.jpg")
    return names


def read_all(paths: list[str], readers: int = READERS, buffered: bool = False) -> float:
    def one(path: str) -> int:
        with open(path, "rb", buffering=-1 if buffered else 0) as f:
            return len(f.read())

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(readers) as pool:
        total = sum(pool.map(one, paths))
    assert total == SIZE * len(paths), "short read"
    return time.perf_counter() - start


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stats(mnt: Path) -> dict[str, Any]:
    out = subprocess.run([*CLOUDFS, "stats", str(mnt), "--json"], capture_output=True, text=True)
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def measure(
    ufs: Path, names: list[str], work: Path, mode: str, args: argparse.Namespace
) -> dict[str, Any]:
    passes, profile = args.passes, args.profile
    mnt, cache = work / f"mnt-{mode}", work / f"cache-{mode}"
    mnt.mkdir()
    options = ["--read-only"] if mode == "dataset" else []
    subprocess.run(
        [*CLOUDFS, "mount", f"file://{ufs}", str(mnt), "--cache-dir", str(cache), *options],
        check=True,
    )
    try:
        before = stats(mnt)
        pid = int(before["mount"]["pid"])
        paths = [str(mnt / n) for n in names]
        read_all(paths)  # cold: fills the caches
        started = stats(mnt)["fuse"]
        start_ops, start_c = started["ops_total"], started.get("answered_in_c", {})
        start_cpu = cpu_seconds(pid)
        spy = None
        if profile:
            spy = subprocess.Popen(
                ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "200",
                 "--output", str(work / f"profile-{mode}.txt"), "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1.0)
        times = [read_all(paths, args.readers, args.buffered) for _ in range(passes)]
        cpu = cpu_seconds(pid) - start_cpu
        after = stats(mnt)
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its samples on SIGINT
            spy.wait(timeout=60)
        requests = after["fuse"]["ops_total"] - start_ops
        in_c = sum(after["fuse"].get("answered_in_c", {}).values()) - sum(start_c.values())
        files = len(paths) * passes
        return {
            "mode": mode,
            "opens": after["mount"].get("opens"),
            "files_per_s": sorted(len(paths) / t for t in times)[len(times) // 2],
            "requests_per_file": requests / files,
            "cpu_us_per_request": cpu / requests * 1e6 if requests else None,
            "cpu_us_per_file": cpu / files * 1e6,
            "answered_in_c_per_file": in_c / files,
            "ops": after["fuse"]["ops"],
        }
    finally:
        subprocess.run([*CLOUDFS, "umount", str(mnt)], check=False)


def hottest(profile: Path, top: int = 15) -> list[tuple[str, float]]:
    """Self time per function on the event loop's thread (py-spy's collapsed stacks)."""
    own: dict[str, int] = {}
    total = 0
    for line in profile.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if "trio/_core/_run.py" not in stack:
            continue  # the event loop's thread: where every request is answered
        leaf = stack.split(";")[-1]
        own[leaf] = own.get(leaf, 0) + int(count)
        total += int(count)
    ranked = sorted(own.items(), key=lambda kv: -kv[1])[:top]
    return [(name, n / total) for name, n in ranked]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=5000)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--readers", type=int, default=READERS, help="reader threads")
    p.add_argument("--buffered", action="store_true", help='open(p, "rb"): isatty() each')
    p.add_argument("--profile", action="store_true", help="py-spy the warm passes")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cloudfs-reqcost-"))
    try:
        ufs = work / "ufs"
        names = make_dataset(ufs, args.files)
        local = [str(ufs / n) for n in names]
        read_all(local)
        passes = range(args.passes)
        rates = [len(local) / read_all(local, args.readers, args.buffered) for _ in passes]
        local_rate = sorted(rates)[len(rates) // 2]
        print(f"local disk: {local_rate:,.0f} files/s (warm, {args.readers} readers)")
        for mode in ("read-write", "dataset"):
            r = measure(ufs, names, work, mode, args)
            cost = r["cpu_us_per_request"]
            print(
                f"{mode}: {r['files_per_s']:,.0f} files/s, {r['requests_per_file']:.2f} requests "
                f"per file, {cost:.0f} us of mount CPU per request" if cost else
                f"{mode}: {r['files_per_s']:,.0f} files/s, no request reached the mount",
            )  # fmt: skip
            print(f"  ({r['opens']}; ops {r['ops']}; answered in C per file "
                  f"{r['answered_in_c_per_file']:.2f})")  # fmt: skip
            prof = work / f"profile-{mode}.txt"
            if args.profile and prof.exists() and prof.stat().st_size:
                for name, share in hottest(prof):
                    print(f"    {share:6.1%}  {name}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
