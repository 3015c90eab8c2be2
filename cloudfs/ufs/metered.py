"""``MeteredObjectStore``: any ObjectStore, with Prometheus metrics of every request.

``cloudfs_ufs_requests_total{op}``, ``cloudfs_ufs_request_seconds{op}`` (for a
stream, the time to open it), ``cloudfs_ufs_errors_total{op}`` (requests that
failed after the store's own retries) and ``cloudfs_ufs_bytes_total{direction}``
(bytes of object bodies; a stream counts what was read from it). The wiring
wraps the mount's store once; nothing else knows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import BinaryIO, TypeVar, cast

from cloudfs.errors import FsError
from cloudfs.metrics import Metrics
from cloudfs.types import ListPage, ObjectInfo
from cloudfs.ufs.interface import ObjectStore

T = TypeVar("T")


class MeteredObjectStore:
    def __init__(self, inner: ObjectStore, metrics: Metrics) -> None:
        self._inner = inner
        self._metrics = metrics
        self._bytes_in = metrics.ufs_bytes.labels("in")
        self._bytes_out = metrics.ufs_bytes.labels("out")

    def _call(self, op: str, fn: Callable[[], T]) -> T:
        self._metrics.ufs_requests.labels(op).inc()
        start = time.perf_counter()
        try:
            return fn()
        except FsError:
            self._metrics.ufs_errors.labels(op).inc()
            raise
        finally:
            self._metrics.ufs_latency.labels(op).observe(time.perf_counter() - start)

    @property
    def uri(self) -> str:
        return self._inner.uri

    def check(self) -> None:
        self._call("check", self._inner.check)

    def list_dir(self, prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        return self._call("list", lambda: self._inner.list_dir(prefix, token, limit))

    def validate_key(self, key: str, *, directory: bool = False) -> None:
        self._inner.validate_key(key, directory=directory)

    def head(self, key: str) -> ObjectInfo:
        return self._call("head", lambda: self._inner.head(key))

    def get_range(self, key: str, offset: int, length: int, etag: str | None = None) -> bytes:
        data = self._call("get", lambda: self._inner.get_range(key, offset, length, etag))
        self._bytes_in.inc(len(data))
        return data

    def get_stream(self, key: str, offset: int) -> BinaryIO:
        stream = self._call("get", lambda: self._inner.get_stream(key, offset))
        return cast(BinaryIO, _CountingStream(stream, self._bytes_in.inc))

    def put_file(self, key: str, path: str, resume: str | None = None) -> ObjectInfo:
        info = self._call("put", lambda: self._inner.put_file(key, path, resume))
        self._bytes_out.inc(os.path.getsize(path))
        return info

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        info = self._call("put", lambda: self._inner.put_bytes(key, data))
        self._bytes_out.inc(len(data))
        return info

    def delete(self, key: str) -> None:
        self._call("delete", lambda: self._inner.delete(key))

    def make_dir(self, key: str) -> None:
        self._call("put", lambda: self._inner.make_dir(key))

    def remove_dir(self, key: str) -> None:
        self._call("delete", lambda: self._inner.remove_dir(key))

    def rename(self, src: str, dst: str, etag: str | None = None) -> ObjectInfo:
        return self._call("rename", lambda: self._inner.rename(src, dst, etag))

    def rename_dir(self, src: str, dst: str) -> None:
        self._call("rename", lambda: self._inner.rename_dir(src, dst))

    def statfs(self) -> tuple[int, int]:
        return self._inner.statfs()


class _CountingStream:
    """A read-only stream that reports the bytes read through it."""

    def __init__(self, inner: BinaryIO, count: Callable[[int], None]) -> None:
        self._inner = inner
        self._count = count

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        self._count(len(data))
        return data

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> _CountingStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
