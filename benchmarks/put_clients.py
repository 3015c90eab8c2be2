"""What one small file's upload costs the uploading process: ``S3ObjectStore.put_file``
through obstore (``NativePut``, the default) and through botocore (issues 26 and 27).

Against moto in server mode on 127.0.0.1, ``--files`` files of ``--size`` bytes are put
by 8 threads, each client in turn, ``--repeats`` times; per pass, PUTs per second and
the process's user+system CPU per PUT (getrusage). Medians are printed, and every pass
with ``--json``.

    python3 benchmarks/put_clients.py --json benchmarks/results/put-clients.json
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from cloudfs.config import S3Config  # noqa: E402
from cloudfs.ufs.s3 import S3ObjectStore  # noqa: E402
from testkit.servers import running_s3_server  # noqa: E402

BUCKET = "putclients"
THREADS = 8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--files", type=int, default=600, help="PUTs per pass (600)")
    p.add_argument("--size", type=int, default=110 * 1024, help="bytes per file (110 KiB)")
    p.add_argument("--repeats", type=int, default=3, help="passes per client (3)")
    p.add_argument("--json", type=Path, help="write every pass here")
    return p.parse_args(argv)


def one_pass(store: S3ObjectStore, path: str, files: int, client: str) -> dict[str, float]:
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda i: store.put_file(f"{client}/{i}", path), range(files)))
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"puts_per_s": files / wall, "cpu_ms_per_put": cpu / files * 1000}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for name, value in {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}.items():
        os.environ.setdefault(name, value)
    passes: dict[str, list[dict[str, float]]] = {"obstore": [], "botocore": []}
    with running_s3_server() as server, tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "body")
        Path(path).write_bytes(os.urandom(args.size))
        config = S3Config(endpoint_url=server.endpoint, region="us-east-1")
        native = S3ObjectStore(BUCKET, "", config)
        native._client.create_bucket(Bucket=BUCKET)
        plain = S3ObjectStore(BUCKET, "", config)
        plain._native_put = None  # what every PUT was before NativePut
        for _ in range(args.repeats):
            for client, store in (("botocore", plain), ("obstore", native)):
                passes[client].append(one_pass(store, path, args.files, client))
                print(client, {k: round(v, 2) for k, v in passes[client][-1].items()})
    for client, runs in passes.items():
        rate = statistics.median(r["puts_per_s"] for r in runs)
        cpu = statistics.median(r["cpu_ms_per_put"] for r in runs)
        print(f"{client}: median {rate:.0f} PUTs/s, {cpu:.2f} ms of client CPU per PUT")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)},
                                         "passes": passes}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
