"""What one S3 call costs the calling process, through CloudFS's ``S3ObjectStore``:
a small file's ``put_file`` (obstore's ``NativePut``, the default, against botocore's
``put_object``) and a directory's ``list_dir`` (``DirectList``, the default, against
botocore's ``list_objects_v2``) (issues 26 and 27).

Against moto in server mode on 127.0.0.1: ``--files`` files of ``--size`` bytes
are put by 8 threads, each way in turn, ``--repeats`` times; then the directory
of those put natively (one page: up to 1,000) is listed ``--lists`` times one
page at a time by one thread, each way in turn. Per pass: calls per second and
the process's user+system CPU per call (getrusage); for listings, per listed
entry. Medians are printed, and every pass with ``--json``.

    python3 benchmarks/s3_call_cost.py --json benchmarks/results/s3-call-cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from cloudfs.config import S3Config  # noqa: E402
from cloudfs.ufs.s3 import S3ObjectStore  # noqa: E402
from testkit.servers import running_s3_server  # noqa: E402

BUCKET = "s3-call-cost"
THREADS = 8
LISTED = 1000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--files", type=int, default=600, help="PUTs per pass (600)")
    p.add_argument("--size", type=int, default=110 * 1024, help="bytes per file (110 KiB)")
    p.add_argument("--lists", type=int, default=20, help="listings of 1,000 entries a pass (20)")
    p.add_argument("--repeats", type=int, default=3, help="passes per way (3)")
    p.add_argument("--json", type=Path, help="write every pass here")
    return p.parse_args(argv)


def measure(calls: int, threads: int, call: Callable[[int], object]) -> tuple[float, float]:
    """(seconds, CPU seconds) of ``calls`` calls on ``threads`` threads."""
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(call, range(calls)))
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def putting(store: S3ObjectStore, prefix: str, path: str) -> Callable[[int], object]:
    return lambda i: store.put_file(f"{prefix}/{i}", path)


def listing(store: S3ObjectStore, prefix: str) -> Callable[[int], object]:
    return lambda _: store.list_dir(prefix)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for name, value in {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}.items():
        os.environ.setdefault(name, value)
    passes: dict[str, list[dict[str, float]]] = {}
    with running_s3_server() as server, tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "body")
        Path(path).write_bytes(os.urandom(args.size))
        config = S3Config(endpoint_url=server.endpoint, region="us-east-1")
        native = S3ObjectStore(BUCKET, "", config)
        native._client.create_bucket(Bucket=BUCKET)
        plain = S3ObjectStore(BUCKET, "", config)
        plain._native_put = plain._lister = None  # every call through botocore
        ways = (("botocore", plain), ("native", native))
        for _ in range(args.repeats):
            for way, store in ways:
                wall, cpu = measure(args.files, THREADS, putting(store, way, path))
                passes.setdefault(f"put {way}", []).append(
                    {"per_s": args.files / wall, "cpu_ms": cpu / args.files * 1000}
                )
        for _ in range(args.repeats):
            for way, store in ways:
                wall, cpu = measure(args.lists, 1, listing(store, "native"))
                entries = args.lists * min(args.files, LISTED)
                passes.setdefault(f"list {way}", []).append(
                    {"per_s": entries / wall, "cpu_ms": cpu / entries * 1000}
                )
    for way, runs in passes.items():
        rate = statistics.median(r["per_s"] for r in runs)
        cpu = statistics.median(r["cpu_ms"] for r in runs)
        unit = "PUTs" if way.startswith("put") else "listed entries"
        print(f"{way}: median {rate:,.0f} {unit}/s, {cpu * 1000:.1f} us of CPU per one")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)},
                                         "passes": passes}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
