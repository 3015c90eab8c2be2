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
from typing import Any, BinaryIO, TypeVar, cast

from cloudfs.errors import FsError
from cloudfs.metrics import Metrics
from cloudfs.types import ObjectInfo
from cloudfs.ufs.forwarding import ForwardingObjectStore
from cloudfs.ufs.interface import ObjectStore

T = TypeVar("T")

# The ``op`` label of each request (``forwarding.OPS``); statfs is not metered.
LABELS = {
    "check": "check",
    "list_dir": "list",
    "head": "head",
    "get_range": "get",
    "get_stream": "get",
    "put_file": "put",
    "put_bytes": "put",
    "make_dir": "put",
    "delete": "delete",
    "remove_dir": "delete",
    "rename": "rename",
    "rename_dir": "rename",
}


class MeteredObjectStore(ForwardingObjectStore):
    def __init__(self, inner: ObjectStore, metrics: Metrics) -> None:
        super().__init__(inner)
        self._metrics = metrics
        self._bytes_in = metrics.ufs_bytes.labels("in")
        self._bytes_out = metrics.ufs_bytes.labels("out")

    def _call(self, op: str, fn: Callable[[], T]) -> T:
        label = LABELS.get(op)
        if label is None:
            return fn()
        self._metrics.ufs_requests.labels(label).inc()
        start = time.perf_counter()
        try:
            return fn()
        except FsError:
            self._metrics.ufs_errors.labels(label).inc()
            raise
        finally:
            self._metrics.ufs_latency.labels(label).observe(time.perf_counter() - start)

    # -- the bytes of object bodies --------------------------------------------

    def get_range(self, key: str, offset: int, length: int, etag: str | None = None) -> bytes:
        data = super().get_range(key, offset, length, etag)
        self._bytes_in.inc(len(data))
        return data

    def get_stream(self, key: str, offset: int) -> BinaryIO:
        stream = super().get_stream(key, offset)
        return cast(BinaryIO, _CountingStream(stream, self._bytes_in.inc))

    def put_file(self, key: str, path: str, resume: str | None = None) -> ObjectInfo:
        info = super().put_file(key, path, resume)
        self._bytes_out.inc(os.path.getsize(path))
        return info

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        info = super().put_bytes(key, data)
        self._bytes_out.inc(len(data))
        return info


class _CountingStream:
    """A read-only stream that reports the bytes read through it."""

    def __init__(self, inner: BinaryIO, count: Callable[[int], None]) -> None:
        self._inner = inner
        self._count = count

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        self._count(len(data))
        return data

    def readinto(self, buffer: Any, /) -> int:
        """The inner stream's ``readinto`` (the read-ahead fills one reused buffer: no
        new ``bytes`` per block), or a ``read`` copied in."""
        readinto = getattr(self._inner, "readinto", None)
        if readinto is not None:
            n: int = readinto(buffer)
        else:
            view = memoryview(buffer).cast("B")
            data = self._inner.read(len(view))
            n = len(data)
            view[:n] = data
        self._count(n)
        return n

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> _CountingStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
