"""The README's first command: a sample training set on a local S3 endpoint, read twice.

Starts an S3-compatible server (moto) on 127.0.0.1, writes a small ImageNet-like
training set into a bucket, mounts it read-only with ``cloudfs mount`` on the
embedded default (LMDB tree, local cache; no server to start by hand; dataset
mode, where the kernel serves warm files without asking the mount), reads every file
through the mount (cold), again (warm), and once more after dropping the
kernel's page cache (served by CloudFS's own block cache), then prints the
throughput of each pass and the block-cache hit ratio scraped from the mount's
Prometheus endpoint, and unmounts.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testkit.servers import free_port, running_s3_server

BUCKET = "training-data"


def make_dataset(client, files: int, file_size: int, shards: int, shard_size: int) -> int:  # type: ignore[no-untyped-def]
    client.create_bucket(Bucket=BUCKET)
    rng = random.Random(0)
    total = 0
    payload = rng.randbytes(file_size)
    for i in range(files):
        key = f"train/class{i % 10:02d}/sample{i:05d}.jpg"
        client.put_object(Bucket=BUCKET, Key=key, Body=payload[i % 97 :] + payload[: i % 97])
        total += file_size
    shard = rng.randbytes(shard_size)
    for i in range(shards):
        client.put_object(Bucket=BUCKET, Key=f"shards/shard-{i:03d}.tar", Body=shard)
        total += shard_size
    return total


def read_all(root: Path, threads: int) -> tuple[int, int, float]:
    paths = [p for p in root.rglob("*") if p.is_file()]
    start = time.perf_counter()

    def read(path: Path) -> int:
        n = 0
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(1 << 20):
                n += len(chunk)
        return n

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(read, paths))
    return len(paths), total, time.perf_counter() - start


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r'^(cloudfs_blockcache_(?:hits|misses)_total)\{tier="(\w+)"\} (\S+)$', line)
        if m:
            values[f"{m.group(1)}:{m.group(2)}"] = float(m.group(3))
    return values


def hit_ratio(before: dict[str, float], after: dict[str, float]) -> tuple[float, int, int]:
    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    hits = delta("cloudfs_blockcache_hits_total:memory") + delta(
        "cloudfs_blockcache_hits_total:disk"
    )
    misses = delta("cloudfs_blockcache_misses_total:disk")
    total = hits + misses
    return (hits / total if total else 1.0), int(hits), int(misses)


def opens_of(mnt: Path) -> str:
    """How the mount serves opens, from ``cloudfs stats`` (dataset mode or not)."""
    stats = subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "stats", str(mnt), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return str(json.loads(stats.stdout)["mount"].get("opens", "?"))


def drop_kernel_caches() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--file-size", type=int, default=110 * 1024)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--shard-size", type=int, default=64 << 20)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()

    with running_s3_server() as s3, tempfile.TemporaryDirectory(prefix="cloudfs-demo-") as tmp:
        print(f"S3 endpoint: {s3.endpoint} (moto, loopback)")
        total = make_dataset(s3.client(), args.files, args.file_size, args.shards, args.shard_size)
        print(
            f"dataset: s3://{BUCKET}: {args.files} files of {args.file_size // 1024} KiB "
            f"+ {args.shards} shards of {args.shard_size >> 20} MiB = {total / 2**20:.0f} MiB"
        )
        mnt = Path(tmp) / "mnt"
        mnt.mkdir()
        port = free_port()
        cmd = [sys.executable, "-m", "cloudfs.cli.main", "mount", f"s3://{BUCKET}", str(mnt),
               "--cache-dir", f"{tmp}/cache", "--metrics", f"127.0.0.1:{port}",
               "--read-only"]  # fmt: skip
        subprocess.run(cmd, check=True, env=s3.env())
        print(f"mounted at {mnt} (read-only); opens go {opens_of(mnt)}\n")
        try:
            rows = []
            for label, drop in (
                ("cold", False),
                ("warm", False),
                ("warm, kernel cache dropped", True),
            ):
                dropped = drop_kernel_caches() if drop else False
                if drop and not dropped:
                    continue
                before = scrape(port)
                files, nbytes, secs = read_all(mnt, args.threads)
                ratio, hits, misses = hit_ratio(before, scrape(port))
                rows.append((label, files, nbytes, secs, ratio, hits, misses))
            print(f"{'pass':28} {'files':>6} {'MiB/s':>8} {'files/s':>8} {'block hits':>11}")
            for label, files, nbytes, secs, ratio, hits, misses in rows:
                hit_text = f"{ratio:6.1%}" if hits + misses else "  (page cache)"
                print(
                    f"{label:28} {files:6d} {nbytes / 2**20 / secs:8.1f} {files / secs:8.0f} "
                    f"{hit_text:>11}"
                )
            total_after = scrape(port)
            ratio, hits, misses = hit_ratio({}, total_after)
            print(
                f"\nblock cache over the run: {hits} hits, {misses} misses ({ratio:.1%} hit ratio)"
            )
        finally:
            subprocess.run(
                [sys.executable, "-m", "cloudfs.cli.main", "umount", str(mnt)], check=False
            )
            print("unmounted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
