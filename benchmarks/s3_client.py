"""One 256 MiB object streamed from moto by several S3 clients, into reused 4 MiB buffers.

Compares what the mount's read path could use for a cold sequential read (issue 12,
part 5a), and the crc32 implementations the disk tier could use (part 4):

* ``botocore-read``: today's path, ``S3ObjectStore.get_stream`` + ``read(4 MiB)``
  (a new ``bytes`` per block, urllib3 assembling it from socket reads);
* ``botocore-readinto``: the same GET, the body read with ``S3ReadStream.readinto``
  straight into one preallocated buffer (http.client's ``readinto`` under urllib3);
* ``crt-http``: awscrt's HTTP client (one connection, the request signed with awscrt's
  SigV4, ``on_body`` callbacks copied into the buffer);
* ``crt-s3``: awscrt's S3 client (what mountpoint-s3 uses) with ``part_size`` 8 MiB
  (its default: parallel ranged GETs) and with one part as large as the object.

    PYTHONPATH=/tmp/benchdeps python3 benchmarks/s3_client.py --repeats 3
    python3 benchmarks/s3_client.py --small 2000 --repeats 3

``--small N`` instead writes N objects of 110 KiB and compares, cold, boto3 GETs with 8
and 16 threads against CloudFS's read path (``ObjectReader`` with a disk tier, no FUSE)
driven by 8 reader tasks that open (``fetch_on_open``) and read one file at a time, as
8 training-loader workers would (part 5b: are enough GETs in flight?).

(awscrt and google-crc32c are not CloudFS dependencies: ``pip install --target
/tmp/benchdeps awscrt google-crc32c``; variants whose module is missing are skipped.)
Prints one line per variant with every repeat and the median, in MiB/s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO_ROOT)]

from cloudfs.config import S3Config  # noqa: E402
from cloudfs.ufs.s3 import S3ObjectStore  # noqa: E402
from testkit.servers import REGION, running_s3_server  # noqa: E402

MiB = 1 << 20
BLOCK = 4 * MiB
BUCKET = "bench"
KEY = "large.bin"


def botocore_read(store: S3ObjectStore, size: int) -> int:
    got = 0
    with store.get_stream(KEY, 0) as body:
        while True:
            data = body.read(BLOCK)
            if not data:
                break
            got += len(data)
    return got


def botocore_readinto(store: S3ObjectStore, size: int) -> int:
    buf = bytearray(BLOCK)
    view = memoryview(buf)
    got = 0
    with store.get_stream(KEY, 0) as body:
        while True:
            n = body.readinto(view)
            if not n:
                break
            got += n
    return got


def crt_http(endpoint: str, size: int) -> int:
    from awscrt.auth import (
        AwsCredentialsProvider,
        AwsSignedBodyValue,
        AwsSigningConfig,
        aws_sign_request,
    )
    from awscrt.http import HttpClientConnection, HttpHeaders, HttpRequest
    from awscrt.io import ClientBootstrap, DefaultHostResolver, EventLoopGroup

    host, port = endpoint.removeprefix("http://").split(":")
    elg = EventLoopGroup(1)
    bootstrap = ClientBootstrap(elg, DefaultHostResolver(elg))
    conn = HttpClientConnection.new(host_name=host, port=int(port), bootstrap=bootstrap).result(10)
    buf = bytearray(BLOCK)
    state = {"got": 0, "fill": 0}
    lock = threading.Lock()

    def on_body(chunk: Any, **_: Any) -> None:
        data = memoryview(chunk)
        with lock:
            while data:
                n = min(len(data), BLOCK - state["fill"])
                buf[state["fill"] : state["fill"] + n] = data[:n]
                state["fill"] = (state["fill"] + n) % BLOCK
                state["got"] += n
                data = data[n:]

    headers = HttpHeaders([("Host", f"{host}:{port}")])
    request = HttpRequest("GET", f"/{BUCKET}/{KEY}", headers)
    signing = AwsSigningConfig(
        credentials_provider=AwsCredentialsProvider.new_static("testing", "testing"),
        region=REGION,
        service="s3",
        signed_body_value=AwsSignedBodyValue.UNSIGNED_PAYLOAD,
    )
    request = aws_sign_request(request, signing).result(10)
    stream = conn.request(request, on_body=on_body)
    stream.activate()
    stream.completion_future.result(300)
    conn.close()
    return state["got"]


def crt_s3(endpoint: str, size: int, part_size: int) -> int:
    from awscrt.auth import AwsCredentialsProvider
    from awscrt.http import HttpHeaders, HttpRequest
    from awscrt.io import ClientBootstrap, DefaultHostResolver, EventLoopGroup
    from awscrt.s3 import S3Client, S3RequestTlsMode, S3RequestType

    host = endpoint.removeprefix("http://")
    elg = EventLoopGroup(2)
    bootstrap = ClientBootstrap(elg, DefaultHostResolver(elg))
    creds = AwsCredentialsProvider.new_static("testing", "testing")
    client = S3Client(
        bootstrap=bootstrap,
        region=REGION,
        credential_provider=creds,
        tls_mode=S3RequestTlsMode.DISABLED,
        part_size=part_size,
    )
    buf = bytearray(BLOCK)
    state = {"got": 0}
    lock = threading.Lock()

    def on_body(chunk: Any, offset: int, **_: Any) -> None:
        data = memoryview(chunk)
        with lock:
            pos = offset % BLOCK
            n = min(len(data), BLOCK - pos)
            buf[pos : pos + n] = data[:n]
            if n < len(data):
                rest = len(data) - n
                buf[:rest] = data[n:]
            state["got"] += len(data)

    headers = HttpHeaders([("Host", host)])
    request = HttpRequest("GET", f"/{BUCKET}/{KEY}", headers)
    s3req = client.make_request(type=S3RequestType.GET_OBJECT, request=request, on_body=on_body)
    s3req.finished_future.result(300)
    return state["got"]


def crc_rates() -> dict[str, float]:
    """GiB/s of each crc over a 4 MiB buffer (median of 3 x 50 calls)."""
    data = os.urandom(BLOCK)
    fns: dict[str, Callable[[bytes], int]] = {"zlib.crc32": zlib.crc32}
    try:
        import google_crc32c

        fns["google_crc32c"] = google_crc32c.value
    except ImportError:
        pass
    try:
        from awscrt import checksums

        fns["awscrt crc32c"] = checksums.crc32c
    except ImportError:
        pass
    rates = {}
    for name, fn in fns.items():
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(50):
                fn(data)
            runs.append(50 * BLOCK / (1 << 30) / (time.perf_counter() - start))
        rates[name] = statistics.median(runs)
    return rates


SMALL = 110 * 1024


def small_files(store: S3ObjectStore, s3: Any, count: int, repeats: int) -> None:
    import concurrent.futures
    import tempfile

    import trio

    from cloudfs.cache.disk import DiskBlockCache
    from cloudfs.cache.memory import MemoryBlockCache
    from cloudfs.config import CacheConfig
    from cloudfs.data.blocks import ObjectRef
    from cloudfs.data.reader import ObjectReader
    from cloudfs.metrics import Metrics

    blob = os.urandom(SMALL)
    keys = [f"small/{i:05d}" for i in range(count)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: s3.put_object(Bucket=BUCKET, Key=k, Body=blob), keys))
    etag = store.head(keys[0]).etag
    refs = [ObjectRef(k, etag, SMALL) for k in keys]

    def boto_rate(threads: int) -> float:
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            got = sum(pool.map(lambda k: len(store.get_range(k, 0, SMALL)), keys))
        assert got == SMALL * count
        return count / (time.perf_counter() - start)

    def reader_rate(readers: int, with_disk: bool = True) -> float:
        with tempfile.TemporaryDirectory() as cache_dir:
            metrics = Metrics()
            config = CacheConfig(cache_dir=cache_dir, memory_bytes=256 * MiB)
            memory = MemoryBlockCache(config.memory_bytes, metrics)
            disk = DiskBlockCache([cache_dir], 10 * (1 << 30), metrics) if with_disk else None

            async def run() -> float:
                todo = iter(refs)
                async with ObjectReader.running(
                    store, memory, disk, config, metrics, "bench", trio.CapacityLimiter(32)
                ) as reader:

                    async def worker() -> None:
                        for ref in todo:
                            reader.fetch_on_open(ref)
                            assert len(await reader.read(ref, 0, SMALL)) == SMALL

                    start = time.perf_counter()
                    async with trio.open_nursery() as nursery:
                        for _ in range(readers):
                            nursery.start_soon(worker)
                    return count / (time.perf_counter() - start)

            return trio.run(run)

    variants: dict[str, Callable[[], float]] = {
        "boto3 GETs, 8 threads": lambda: boto_rate(8),
        "boto3 GETs, 16 threads": lambda: boto_rate(16),
        "ObjectReader, 8 readers": lambda: reader_rate(8),
        "ObjectReader, 16 readers": lambda: reader_rate(16),
        "ObjectReader, 8, no disk": lambda: reader_rate(8, with_disk=False),
    }
    results: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            results[name].append(fn())
    for name, runs in results.items():
        shown = ", ".join(f"{r:.0f}" for r in runs)
        print(f"{name:<26} median {statistics.median(runs):6.0f} files/s  ({shown})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--small", type=int, default=0, metavar="N")
    args = parser.parse_args()
    size = args.size_mib * MiB
    if not args.small:
        for name, rate in crc_rates().items():
            print(f"crc {name:<16} {rate:8.2f} GiB/s")
    with running_s3_server() as server:
        os.environ.update(server.env())
        s3 = server.client()
        s3.create_bucket(Bucket=BUCKET)
        if args.small:
            config = S3Config(endpoint_url=server.endpoint, region=REGION)
            small_files(S3ObjectStore(BUCKET, "", config), s3, args.small, args.repeats)
            return
        s3.put_object(Bucket=BUCKET, Key=KEY, Body=os.urandom(size))
        store = S3ObjectStore(BUCKET, "", S3Config(endpoint_url=server.endpoint, region=REGION))
        variants: dict[str, Callable[[], int]] = {
            "botocore-read": lambda: botocore_read(store, size),
            "botocore-readinto": lambda: botocore_readinto(store, size),
        }
        try:
            import awscrt  # noqa: F401

            variants["crt-http"] = lambda: crt_http(server.endpoint, size)
            variants["crt-s3 (8 MiB parts)"] = lambda: crt_s3(server.endpoint, size, 8 * MiB)
            variants["crt-s3 (one part)"] = lambda: crt_s3(server.endpoint, size, size)
        except ImportError:
            print("awscrt not importable: its variants are skipped")
        results: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.repeats):
            for name, fn in variants.items():  # interleaved, so noise hits all alike
                start = time.perf_counter()
                got = fn()
                elapsed = time.perf_counter() - start
                assert got == size, f"{name}: {got} of {size} bytes"
                results[name].append(size / MiB / elapsed)
        for name, runs in results.items():
            shown = ", ".join(f"{r:.0f}" for r in runs)
            print(f"{name:<22} median {statistics.median(runs):6.0f} MiB/s  ({shown})")


if __name__ == "__main__":
    main()
