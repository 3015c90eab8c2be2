"""An in-memory ObjectStore fake for the cache/data unit tests (plus its own sanity tests).

Records every call (``calls``, ``ranges``), can delay ``get_range`` (to make
concurrent readers overlap) and fail the next N calls of a method with a given
exception. Thread-safe, because the code under test calls it from worker threads.
"""

from __future__ import annotations

import hashlib
import io
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import BinaryIO

import pytest

from cloudfs.errors import NotFound, RemoteIOError
from cloudfs.types import ListPage, ObjectInfo


class FakeStore:
    def __init__(self, objects: dict[str, bytes] | None = None) -> None:
        self.objects: dict[str, bytes] = dict(objects or {})
        self.calls: Counter[str] = Counter()
        self.ranges: list[tuple[str, int, int]] = []  # (key, offset, length) per get_range
        self.delay = 0.0
        self.failures: dict[str, list[BaseException]] = {}
        self.on_get_range: Callable[[str, int, int], None] | None = None
        self.max_concurrent_ranges = 0
        self._concurrent_ranges = 0
        self._lock = threading.Lock()

    # -- helpers for tests ----------------------------------------------------

    def fail_next(self, method: str, *errors: BaseException) -> None:
        with self._lock:
            self.failures.setdefault(method, []).extend(errors)

    def etag(self, key: str) -> str:
        return hashlib.md5(self.objects[key]).hexdigest()

    def _enter(self, method: str) -> None:
        with self._lock:
            self.calls[method] += 1
            queued = self.failures.get(method)
            error = queued.pop(0) if queued else None
        if error is not None:
            raise error

    def _data(self, key: str) -> bytes:
        try:
            return self.objects[key]
        except KeyError:
            raise NotFound(key) from None

    # -- the ObjectStore methods the data layer uses --------------------------

    @property
    def uri(self) -> str:
        return "fake://bucket"

    def check(self) -> None:
        self._enter("check")

    def list_dir(self, prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        raise NotImplementedError

    def head(self, key: str) -> ObjectInfo:
        self._enter("head")
        data = self._data(key)
        return ObjectInfo(key=key, size=len(data), mtime_ns=0, etag=self.etag(key))

    def get_range(self, key: str, offset: int, length: int, etag: str | None = None) -> bytes:
        self._enter("get_range")
        with self._lock:
            self.ranges.append((key, offset, length))
            self._concurrent_ranges += 1
            self.max_concurrent_ranges = max(self.max_concurrent_ranges, self._concurrent_ranges)
        try:
            if self.on_get_range is not None:
                self.on_get_range(key, offset, length)
            if self.delay:
                time.sleep(self.delay)
            return self._data(key)[offset : offset + length]
        finally:
            with self._lock:
                self._concurrent_ranges -= 1

    def get_stream(self, key: str, offset: int) -> BinaryIO:
        self._enter("get_stream")
        return io.BytesIO(self._data(key)[offset:])

    def put_file(self, key: str, path: str, resume: str | None = None) -> ObjectInfo:
        self._enter("put_file")
        with open(path, "rb") as f:
            self.objects[key] = f.read()
        return ObjectInfo(key=key, size=len(self.objects[key]), mtime_ns=0, etag=self.etag(key))

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        self._enter("put_bytes")
        self.objects[key] = bytes(data)
        return ObjectInfo(key=key, size=len(data), mtime_ns=0, etag=self.etag(key))

    def delete(self, key: str) -> None:
        self._enter("delete")
        self.objects.pop(key, None)

    def make_dir(self, key: str) -> None:
        raise NotImplementedError

    def remove_dir(self, key: str) -> None:
        raise NotImplementedError

    def rename(self, src: str, dst: str, etag: str | None = None) -> ObjectInfo:
        raise NotImplementedError

    def rename_dir(self, src: str, dst: str) -> None:
        raise NotImplementedError

    def statfs(self) -> tuple[int, int]:
        return (1 << 50, 1 << 49)


def test_fake_store_ranges_and_failures() -> None:
    store = FakeStore({"a": b"0123456789"})
    assert store.get_range("a", 8, 5) == b"89"
    assert store.ranges == [("a", 8, 5)]
    store.fail_next("get_range", RemoteIOError("boom"))
    with pytest.raises(RemoteIOError):
        store.get_range("a", 0, 1)
    assert store.get_range("a", 0, 1) == b"0"
    assert store.calls["get_range"] == 3
    with pytest.raises(NotFound):
        store.get_range("missing", 0, 1)
    assert store.get_stream("a", 3).read() == b"3456789"
