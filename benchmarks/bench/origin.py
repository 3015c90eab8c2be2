"""The origin's own ceiling: boto3 straight to the S3 server, no filesystem in between."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import boto3
from botocore.config import Config

from bench.dataset import DatasetSpec, MiB

CHUNK = 1 << 20
PART = 8 * MiB
RANGE_THREADS = 8
SMALL_ONE_THREAD_MAX = 1000  # objects fetched by the 1-thread pass (it is the slow one)


def client(endpoint: str, env: dict[str, str]) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env.get("AWS_DEFAULT_REGION", "us-east-1"),
        config=Config(max_pool_connections=32, retries={"max_attempts": 3}),
    )


def measure(endpoint: str, env: dict[str, str], bucket: str, spec: DatasetSpec) -> dict[str, Any]:
    s3 = client(endpoint, env)
    key = spec.large_keys()[0]
    size = spec.large_size

    start = time.perf_counter()
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    got = sum(len(chunk) for chunk in body.iter_chunks(CHUNK))
    stream_s = time.perf_counter() - start
    assert got == size, f"GET returned {got} of {size} bytes"

    def get_range(offset: int) -> int:
        end = min(offset + PART, size) - 1
        data: bytes = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={offset}-{end}")[
            "Body"
        ].read()
        return len(data)

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(RANGE_THREADS) as pool:
        got = sum(pool.map(get_range, range(0, size, PART)))
    ranged_s = time.perf_counter() - start
    assert got == size, f"ranged GETs returned {got} of {size} bytes"

    def get_small(k: str) -> int:
        return len(s3.get_object(Bucket=bucket, Key=k)["Body"].read())

    keys = spec.small_keys()
    one = keys[:SMALL_ONE_THREAD_MAX]
    start = time.perf_counter()
    for k in one:
        get_small(k)
    one_s = time.perf_counter() - start
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for _ in pool.map(get_small, keys):
            pass
    many_s = time.perf_counter() - start

    return {
        "results": {
            "origin_get_stream": size / MiB / stream_s,
            "origin_get_ranged8": size / MiB / ranged_s,
            "origin_small_get1": len(one) / one_s,
            "origin_small_get16": len(keys) / many_s,
        },
        "raw": {"small_get1_objects": len(one), "small_get16_objects": len(keys)},
    }


def put_many(
    endpoint: str, env: dict[str, str], bucket: str, prefix: str, count: int, size: int,
    threads: int,
) -> dict[str, Any]:  # fmt: skip
    """The origin's own rate for new small objects: ``count`` PUTs of ``size`` bytes from
    ``threads`` boto3 threads (what an uploader with no filesystem would reach), shaped as
    a write benchmark's system record (``many_files_s``; in S3 at once). Deleted after."""
    s3 = client(endpoint, env)
    body = bytes(range(256)) * (size // 256) + b"\0" * (size % 256)
    keys = [f"{prefix}/{i:06d}" for i in range(count)]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=body), keys))
    seconds = time.perf_counter() - start
    for i in range(0, count, 1000):
        batch = [{"Key": k} for k in keys[i : i + 1000]]
        s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
    rate = count / seconds
    return {
        "results": {"many_files_s": rate, "many_files_s_to_s3": rate, "many_files_written": count},
        "raw": {"many": {"files": count, "seconds": seconds, "threads": threads}},
        "errors": [],
        "verified": {},
    }
