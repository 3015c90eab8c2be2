"""The S3 clients compared by benchmarks/get_clients.py, and the worker that drives one.

Why each client lands bytes the same way: the question (issue 26) is what a cold
block or small-file fetch costs CloudFS end to end, so every client's body goes
where the cache would put it (an 8 MiB range ``os.pwrite`` at its offset into one
preallocated file; a small object into its own file) and gets a ``zlib.crc32``.
Buffers go to ``pwrite``/``crc32`` as memoryviews, never converted to ``bytes``.

The worker runs in its own process (one per client and repeat) so its CPU time
and GIL-held time are the client's alone; it talks to the parent over stdin and
stdout: ``pass NAME`` (ready), the parent answers ``go``, then ``result JSON``.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MiB = 1 << 20
PART = 8 * MiB
RANGE_IN_FLIGHT = 8
SMALL_IN_FLIGHT = 16
TIMEOUT_S = 120.0
PASSES = ("ranged", "stream", "small")


def pwrite_all(fd: int, data: Any, offset: int) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def write_file(path: str, data: Any) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, data, 0)
    finally:
        os.close(fd)


class Client:
    """One S3 client: ranged, whole-object and streaming GETs; generic thread passes."""

    def __init__(self, endpoint: str, bucket: str, key: str, secret: str, region: str) -> None:
        self.endpoint, self.bucket = endpoint, bucket
        self.key, self.secret, self.region = key, secret, region
        self.extra: dict[str, Any] = {}

    def get_range(self, key: str, offset: int, length: int) -> Any:
        raise NotImplementedError

    def get_whole(self, key: str, size: int) -> Any:
        return self.get_range(key, 0, size)

    def stream(self, key: str) -> Iterator[Any] | None:
        """Chunks of one GET of the whole object; None: the client has no streaming GET."""
        return None

    def ranged(self, key: str, size: int, fd: int) -> list[int]:
        def one(offset: int) -> int:
            n = min(PART, size - offset)
            view = memoryview(self.get_range(key, offset, n))
            if view.nbytes != n:
                raise RuntimeError(f"range {offset}+{n} returned {view.nbytes} bytes")
            pwrite_all(fd, view, offset)
            return zlib.crc32(view)

        with ThreadPoolExecutor(RANGE_IN_FLIGHT) as pool:
            return list(pool.map(one, range(0, size, PART)))

    def streamed(self, key: str, size: int, fd: int) -> list[int]:
        chunks = self.stream(key)
        if chunks is None:
            raise NotImplementedError("no streaming GET")
        offset, crc = 0, 0
        for chunk in chunks:
            view = memoryview(chunk)
            pwrite_all(fd, view, offset)
            crc = zlib.crc32(view, crc)
            offset += view.nbytes
        if offset != size:
            raise RuntimeError(f"stream returned {offset} of {size} bytes")
        return [crc]

    def small(self, keys: list[str], size: int, out_dir: str) -> list[int]:
        def one(item: tuple[int, str]) -> int:
            view = memoryview(self.get_whole(item[1], size))
            if view.nbytes != size:
                raise RuntimeError(f"{item[1]} returned {view.nbytes} of {size} bytes")
            write_file(os.path.join(out_dir, f"{item[0]:06d}"), view)
            return zlib.crc32(view)

        with ThreadPoolExecutor(SMALL_IN_FLIGHT) as pool:
            return list(pool.map(one, enumerate(keys)))


class Boto3Client(Client):
    """Plain boto3 ``get_object(...)['Body'].read()``: the reference everyone knows."""

    def __init__(self, *args: str) -> None:
        super().__init__(*args)
        import boto3.session
        from botocore.config import Config

        config = Config(
            max_pool_connections=32,
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        self.s3 = boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.key,
            aws_secret_access_key=self.secret,
            region_name=self.region,
            config=config,
        )

    def get_range(self, key: str, offset: int, length: int) -> Any:
        rng = f"bytes={offset}-{offset + length - 1}"
        return self.s3.get_object(Bucket=self.bucket, Key=key, Range=rng)["Body"].read()

    def get_whole(self, key: str, size: int) -> Any:
        return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def stream(self, key: str) -> Iterator[Any] | None:
        body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"]
        return iter(body.iter_chunks(PART))


class DirectClient(Client):
    """CloudFS today: ``S3ObjectStore.get_range`` (signed GETs through botocore's pool)."""

    def __init__(self, *args: str) -> None:
        super().__init__(*args)
        from cloudfs.config import S3Config
        from cloudfs.ufs.s3 import S3ObjectStore

        # As factory.open_store does for s3://bucket with --endpoint-url; the
        # credentials come from the environment (AWS_ACCESS_KEY_ID, ...).
        config = S3Config(endpoint_url=self.endpoint, region=self.region)
        self.store = S3ObjectStore(self.bucket, "", config)

    def get_range(self, key: str, offset: int, length: int) -> Any:
        return self.store.get_range(key, offset, length)

    def stream(self, key: str) -> Iterator[Any] | None:
        def chunks() -> Iterator[Any]:
            with self.store.get_stream(key, 0) as body:
                while data := body.read(PART):
                    yield data

        return chunks()

    def finish(self) -> None:
        direct = self.store.direct
        if direct is not None:
            self.extra.update(direct_served=direct.served, direct_fell_back=direct.fell_back)


class ObstoreClient(Client):
    """obstore (Rust object_store): bodies come back as buffer-protocol ``Bytes``."""

    def __init__(self, *args: str) -> None:
        super().__init__(*args)
        from obstore.store import S3Store  # type: ignore[import-untyped,import-not-found,unused-ignore]

        self.store = S3Store(
            self.bucket,
            endpoint=self.endpoint,
            access_key_id=self.key,
            secret_access_key=self.secret,
            region=self.region,
            virtual_hosted_style_request=False,
            client_options={"allow_http": True},
        )

    def get_range(self, key: str, offset: int, length: int) -> Any:
        import obstore  # type: ignore[import-untyped,import-not-found,unused-ignore]

        return obstore.get_range(self.store, key, start=offset, length=length)

    def get_whole(self, key: str, size: int) -> Any:
        import obstore  # type: ignore[import-untyped,import-not-found,unused-ignore]

        return obstore.get(self.store, key).bytes()  # a Bytes: no copy into Python

    def stream(self, key: str) -> Iterator[Any] | None:
        import obstore  # type: ignore[import-untyped,import-not-found,unused-ignore]

        chunks: Iterator[Any] = iter(obstore.get(self.store, key).stream(min_chunk_size=PART))
        return chunks


class ArrowClient(Client):
    """pyarrow's C++ S3FileSystem: ``read_at`` fills a new ``bytes`` with the GIL released."""

    def __init__(self, *args: str) -> None:
        super().__init__(*args)
        from pyarrow import fs

        self.fs = fs.S3FileSystem(
            endpoint_override=self.endpoint.removeprefix("http://"),
            scheme="http",
            access_key=self.key,
            secret_key=self.secret,
            region=self.region,
            connect_timeout=5,
            request_timeout=10,
        )

    def ranged(self, key: str, size: int, fd: int) -> list[int]:
        # One handle (one HEAD) per object, as CloudFS would hold one per open file.
        self.file = self.fs.open_input_file(f"{self.bucket}/{key}")
        try:
            return super().ranged(key, size, fd)
        finally:
            self.file.close()

    def get_range(self, key: str, offset: int, length: int) -> Any:
        return self.file.read_at(length, offset)

    def get_whole(self, key: str, size: int) -> Any:
        with self.fs.open_input_stream(f"{self.bucket}/{key}", compression=None) as f:
            return f.read_buffer()

    def stream(self, key: str) -> Iterator[Any] | None:
        def chunks() -> Iterator[Any]:
            path = f"{self.bucket}/{key}"
            with self.fs.open_input_stream(path, compression=None) as f:
                while (buf := f.read_buffer(PART)).size:
                    yield buf

        return chunks()


class CrtClient(Client):
    """awscrt's S3 client (mountpoint-s3's): the body is written to a file in native code.

    Its Python API has no "write at offset" (``recv_filepath`` creates or replaces a
    file), so the large pass is one whole-object GET that the CRT itself splits into
    8 MiB ranged GETs, 8 connections at once, written into the target file; the crc32
    is then taken over the file's pages (mmap), as it would have to be in CloudFS.
    """

    def __init__(self, *args: str) -> None:
        super().__init__(*args)
        from awscrt.auth import AwsCredentialsProvider  # type: ignore[import-untyped,import-not-found,unused-ignore]
        from awscrt.io import ClientBootstrap, DefaultHostResolver, EventLoopGroup  # type: ignore[import-untyped,import-not-found,unused-ignore]
        from awscrt.s3 import S3Client, S3RequestTlsMode  # type: ignore[import-untyped,import-not-found,unused-ignore]

        elg = EventLoopGroup(2)
        self.s3 = S3Client(
            bootstrap=ClientBootstrap(elg, DefaultHostResolver(elg)),
            region=self.region,
            credential_provider=AwsCredentialsProvider.new_static(self.key, self.secret),
            tls_mode=S3RequestTlsMode.DISABLED,
            part_size=PART,
        )
        self.host = self.endpoint.removeprefix("http://")

    def fetch(self, key: str, path: str, part_size: int, connections: int) -> None:
        from awscrt.http import HttpHeaders, HttpRequest  # type: ignore[import-untyped,import-not-found,unused-ignore]
        from awscrt.s3 import S3RequestType  # type: ignore[import-untyped,import-not-found,unused-ignore]

        request = HttpRequest("GET", f"/{self.bucket}/{key}", HttpHeaders([("Host", self.host)]))
        s3req = self.s3.make_request(
            type=S3RequestType.GET_OBJECT,
            request=request,
            recv_filepath=path,
            part_size=part_size,
            max_active_connections_override=connections,
        )
        s3req.finished_future.result(TIMEOUT_S)

    def get_whole(self, key: str, size: int) -> Any:
        with tempfile.NamedTemporaryFile(dir="/tmp") as f:
            self.fetch(key, f.name, PART, 1)
            return f.read()

    def _whole_into(self, key: str, size: int, fd: int, part: int, connections: int) -> list[int]:
        import mmap

        self.fetch(key, f"/proc/self/fd/{fd}", part, connections)
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mm:
            view = memoryview(mm)
            try:
                crcs = [zlib.crc32(view[o : o + PART]) for o in range(0, size, PART)]
            finally:
                view.release()
        return crcs

    def ranged(self, key: str, size: int, fd: int) -> list[int]:
        return self._whole_into(key, size, fd, PART, RANGE_IN_FLIGHT)

    def streamed(self, key: str, size: int, fd: int) -> list[int]:
        return self._whole_into(key, size, fd, max(size, PART), 1)

    def small(self, keys: list[str], size: int, out_dir: str) -> list[int]:
        def one(item: tuple[int, str]) -> int:
            path = os.path.join(out_dir, f"{item[0]:06d}")
            self.fetch(item[1], path, PART, 1)
            with open(path, "rb", buffering=0) as f:
                data = f.read()
            if len(data) != size:
                raise RuntimeError(f"{item[1]} landed {len(data)} of {size} bytes")
            return zlib.crc32(data)

        with ThreadPoolExecutor(SMALL_IN_FLIGHT) as pool:
            return list(pool.map(one, enumerate(keys)))


CLIENTS: dict[str, Callable[..., Client]] = {
    "boto3": Boto3Client,
    "direct": DirectClient,
    "obstore": ObstoreClient,
    "awscrt": CrtClient,
    "pyarrow": ArrowClient,
}


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _checked(name: str, crcs: list[int], spec: dict[str, Any]) -> int:
    """How many bodies landed, once their crc32s are the uploaded bytes' (else raise)."""
    if name == "small":
        good = all(c == spec["small_crc"] for c in crcs) and len(crcs) == len(spec["small_keys"])
    else:
        good = crcs in (spec["range_crcs"], [spec["whole_crc"]])
    if not good:
        raise RuntimeError(f"{name}: the crc32s of what landed are not the uploaded bytes'")
    return len(crcs)


def _run_pass(client: Client, name: str, spec: dict[str, Any], work: str) -> list[int]:
    size = int(spec["large_size"])
    if name == "small":
        out = os.path.join(work, "small")
        os.makedirs(out, exist_ok=True)
        return client.small(list(spec["small_keys"]), int(spec["small_size"]), out)
    fd = os.open(os.path.join(work, f"{name}.bin"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        if name == "ranged":
            return client.ranged(spec["large_key"], size, fd)
        return client.streamed(spec["large_key"], size, fd)
    finally:
        os.close(fd)


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _crc_for(seconds: float) -> None:
    data = os.urandom(64 * MiB)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        zlib.crc32(data)  # over 5 KiB: zlib releases the GIL


GIL_CHECKS: dict[str, tuple[float, Callable[[], None]]] = {
    # name: (GIL-held seconds expected, what runs)
    "busy 1 s, one thread": (1.0, lambda: _busy(1.0)),
    "sleep 1 s": (0.0, lambda: time.sleep(1.0)),
    "busy 1 s, 4 threads at once": (1.0, lambda: _threads(4, lambda: _busy(1.0))),
    "crc32 of 64 MiB buffers for 1 s": (0.0, lambda: _crc_for(1.0)),
}


def _threads(n: int, fn: Callable[[], None]) -> None:
    with ThreadPoolExecutor(n) as pool:
        for _ in range(n):
            pool.submit(fn)


def gil_check_worker() -> None:
    """Known cases for the GIL-held measure, in the same pass protocol as the clients."""
    for name, (_, run) in GIL_CHECKS.items():
        _say(f"pass {name}")
        if sys.stdin.readline().strip() != "go":
            return
        cpu0, t0 = _cpu_s(), time.perf_counter()
        run()
        wall, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
        _say("result " + json.dumps({"pass": name, "count": 1, "wall_s": wall, "cpu_s": cpu}))
    _say("extra {}")


def worker(spec: dict[str, Any]) -> None:
    """Build the client, warm it with one small GET, then run each pass on the parent's go."""
    if spec["client"] == "gil-check":
        gil_check_worker()
        return
    env = os.environ
    args = (spec["endpoint"], spec["bucket"], env["AWS_ACCESS_KEY_ID"])
    client = CLIENTS[spec["client"]](*args, env["AWS_SECRET_ACCESS_KEY"], spec["region"])
    if "probe_etag" in spec:
        from bench import getprobe

        _say("extra " + json.dumps({"probe": getprobe.probe(client, spec["probe_etag"])}))
        return
    client.get_whole(spec["small_keys"][0], int(spec["small_size"]))  # connect, lazy imports
    work = spec["work_dir"]
    for name in spec["passes"]:
        _say(f"pass {name}")
        if sys.stdin.readline().strip() != "go":
            return
        cpu0, t0 = _cpu_s(), time.perf_counter()
        result: dict[str, Any] = {"pass": name}
        try:
            result["count"] = _checked(name, _run_pass(client, name, spec, work), spec)
        except NotImplementedError as err:
            result["skipped"] = str(err)
        except Exception as err:  # one line per failure, the next pass still runs
            result["error"] = f"{type(err).__name__}: {err}"[:300]
        result["wall_s"] = time.perf_counter() - t0
        result["cpu_s"] = _cpu_s() - cpu0
        _say("result " + json.dumps(result))
    finish = getattr(client, "finish", None)
    if finish is not None:
        finish()
    _say("extra " + json.dumps(client.extra))
