"""The child side of the without-FUSE passes: one client, several passes, one process.

``python3 -m bench.nofuseload`` reads one JSON line on stdin that names the client and
how to reach the store, builds the client, prints ``{"ready": true}``, then answers each
further line (a pass: ``{"keys": [...], "readers": N}``) with one JSON line (bytes,
seconds, the crc32 of every key in order) until stdin ends. The parent drops the kernel's
caches and zeroes the proxy's counts between lines, so the first pass is cold (a new
process, empty in-process caches) and the next ones are warm (same process).

Clients (``"client"``):

- ``cloudfs``: ``cloudfs.fsspec.CloudFileSystem`` (``"options"``: its storage options);
- ``boto3``: ``get_object`` (``"endpoint"``, ``"bucket"``, ``"key_id"``, ``"secret"``);
- ``s3fs``: ``s3fs.S3FileSystem`` (the same keys), run by the s3fs virtual environment's
  interpreter, which has s3fs but neither boto3 nor this checkout's dependencies.

Large files are read with ``open()`` and 1 MiB ``read()`` calls (boto3: the body in 1 MiB
chunks); small files whole (``cat_file``; boto3: ``Body.read()``). Only the standard
library is imported at the top, so every interpreter can run this file.
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import time
import zlib
from collections.abc import Callable
from typing import Any

CHUNK = 1 << 20
MiB = 1 << 20

Reader = Callable[[str], tuple[int, int]]  # key -> (bytes, crc32)


def _stream(f: Any) -> tuple[int, int]:
    total = crc = 0
    while chunk := f.read(CHUNK):
        total += len(chunk)
        crc = zlib.crc32(chunk, crc)
    return total, crc


def _whole(data: bytes) -> tuple[int, int]:
    return len(data), zlib.crc32(data)


def fsspec_reader(fs: Any, root: str, stream: bool) -> Reader:
    """``fs.open`` + 1 MiB reads (``stream``) or ``fs.cat_file`` of ``root/key``."""

    def read(key: str) -> tuple[int, int]:
        path = f"{root}/{key}"
        if stream:
            with fs.open(path, "rb") as f:
                return _stream(f)
        return _whole(fs.cat_file(path))

    return read


def cloudfs_fs(spec: dict[str, Any]) -> Any:
    from cloudfs.fsspec import CloudFileSystem

    return CloudFileSystem(skip_instance_cache=True, **spec["options"])


def s3fs_fs(spec: dict[str, Any]) -> Any:
    import s3fs  # the s3fs virtual environment's

    return s3fs.S3FileSystem(
        key=spec["key_id"],
        secret=spec["secret"],
        endpoint_url=spec["endpoint"],
        client_kwargs={"region_name": spec.get("region", "us-east-1")},
        skip_instance_cache=True,
    )


def boto3_reader(spec: dict[str, Any], stream: bool) -> Reader:
    import boto3
    from botocore.config import Config

    s3 = boto3.client(
        "s3",
        endpoint_url=spec["endpoint"],
        aws_access_key_id=spec["key_id"],
        aws_secret_access_key=spec["secret"],
        region_name=spec.get("region", "us-east-1"),
        config=Config(max_pool_connections=32, retries={"max_attempts": 3}),
    )
    bucket = spec["bucket"]

    def read(key: str) -> tuple[int, int]:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        if not stream:
            return _whole(body.read())
        total = crc = 0
        for chunk in body.iter_chunks(CHUNK):
            total += len(chunk)
            crc = zlib.crc32(chunk, crc)
        return total, crc

    return read


def make_readers(spec: dict[str, Any]) -> tuple[Reader, Reader]:
    """(large reader, small reader) of the client ``spec`` names."""
    client = spec["client"]
    if client == "boto3":
        return boto3_reader(spec, True), boto3_reader(spec, False)
    if client == "cloudfs":
        fs, root = cloudfs_fs(spec), spec["root"]
    elif client == "s3fs":
        fs, root = s3fs_fs(spec), spec["bucket"]
    else:
        raise ValueError(f"unknown client {client!r}")
    return fsspec_reader(fs, root, True), fsspec_reader(fs, root, False)


def run_pass(read: Reader, keys: list[str], readers: int) -> dict[str, Any]:
    start = time.perf_counter()
    if readers == 1:
        got = [read(k) for k in keys]
    else:
        with concurrent.futures.ThreadPoolExecutor(readers) as pool:
            got = list(pool.map(read, keys))
    secs = time.perf_counter() - start
    total = sum(n for n, _ in got)
    return {
        "files": len(keys),
        "bytes": total,
        "seconds": secs,
        "mib_s": total / MiB / secs,
        "files_s": len(keys) / secs,
        "crcs": [crc for _, crc in got],
    }


def main() -> int:
    spec = json.loads(sys.stdin.readline())
    large, small = make_readers(spec)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        read = large if job.get("stream", True) else small
        print(json.dumps(run_pass(read, job["keys"], int(job["readers"]))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
