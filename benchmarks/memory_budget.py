"""Does a mount stay within its memory budget? Peak RSS while reading far more than it holds.

Starts moto on 127.0.0.1, writes ``--files`` objects of 256 MiB, mounts them with
a small memory tier (``--memory-cache-size``, 64M by default) and a disk tier
smaller than the data, reads every file ``--passes`` times (kernel caches dropped
before each read), and prints the mount process's VmRSS after each read and its
VmHWM at the end, against the budget (memory tier + 300 MiB, issue 4).

    python3 benchmarks/memory_budget.py [--memory-cache-size 64M] [--files 2] [--passes 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cloudfs.sizes import parse_size
from testkit.servers import running_s3_server

MiB = 1024 * 1024
BUCKET = "memory-budget"


def status(pid: int, field: str) -> int:
    """A ``/proc/PID/status`` field in bytes (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise LookupError(field)


def mount_pid(mountpoint: str) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"mount" in cmd and mountpoint.encode() in cmd:
                return int(entry.name)
    raise LookupError(f"no mount process for {mountpoint}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-cache-size", default="64M")
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    budget = parse_size(args.memory_cache_size) + 300 * MiB
    with running_s3_server() as s3:
        client = s3.client()
        client.create_bucket(Bucket=BUCKET)
        for i in range(args.files):
            client.put_object(Bucket=BUCKET, Key=f"big{i}", Body=os.urandom(256 * MiB))
        work = tempfile.mkdtemp(prefix="cloudfs-memory-")
        mnt = os.path.join(work, "mnt")
        os.mkdir(mnt)
        cmd = [
            sys.executable, "-m", "cloudfs.cli.main", "mount", f"s3://{BUCKET}", mnt,
            "--cache-dir", os.path.join(work, "cache"), "--memory-cache-size",
            args.memory_cache_size, "--cache-size", "256M",
        ]  # fmt: skip
        subprocess.run(cmd, env=s3.env(), check=True, timeout=60)
        try:
            pid = mount_pid(mnt)
            print(f"after mount: RSS {status(pid, 'VmRSS') / MiB:.0f} MiB")
            for n in range(args.passes):
                for i in range(args.files):
                    subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"])
                    started = time.perf_counter()
                    with open(os.path.join(mnt, f"big{i}"), "rb", buffering=0) as f:
                        while f.read(MiB):
                            pass
                    rate = 256 / (time.perf_counter() - started)
                    rss = status(pid, "VmRSS") / MiB
                    print(f"pass {n + 1} big{i}: {rate:.0f} MiB/s, RSS {rss:.0f} MiB")
            peak = status(pid, "VmHWM")
            verdict = "within" if peak <= budget else "OVER"
            print(f"peak (VmHWM) {peak / MiB:.0f} MiB: {verdict} the {budget / MiB:.0f} MiB budget")
        finally:
            subprocess.run([sys.executable, "-m", "cloudfs.cli.main", "umount", mnt], timeout=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
