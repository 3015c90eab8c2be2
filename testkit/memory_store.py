"""An in-memory ObjectStore with S3 semantics, for unit and contract tests.

Flat keys; a directory exists because keys live under its prefix or because of
a zero-byte "dir/" marker; ``list_dir`` rolls deeper keys up into common
prefixes and pages with a marker like S3's ListObjectsV2. ETags are MD5 hex.
``calls`` counts every method call so tests can assert how much UFS traffic an
operation costs, and ``failures`` makes chosen methods raise (fault injection).
"""

from __future__ import annotations

import hashlib
import io
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import BinaryIO

from cloudfs.errors import NotFound
from cloudfs.types import ListPage, ObjectInfo
from cloudfs.ufs.interface import check_version
from cloudfs.ufs.s3_errors import validate_s3_key


class MemoryObjectStore:
    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self._objects: dict[str, tuple[bytes, int, str]] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self.calls: Counter[str] = Counter()
        self.failures: dict[str, Exception] = {}

    # -- test helpers -------------------------------------------------------

    def _enter(self, method: str) -> None:
        with self._lock:
            self.calls[method] += 1
            failure = self.failures.get(method)
        if failure is not None:
            raise failure

    def stored_keys(self) -> list[str]:
        """Every stored key (markers end with "/"), sorted; not counted as a call."""
        with self._lock:
            return sorted(self._objects)

    def data(self, key: str) -> bytes:
        """An object's bytes, not counted as a call."""
        with self._lock:
            return self._objects[key][0]

    def reset_calls(self) -> None:
        with self._lock:
            self.calls.clear()

    def _put(self, key: str, data: bytes) -> ObjectInfo:
        validate_s3_key(key)  # S3 answers KeyTooLongError
        etag = hashlib.md5(data).hexdigest()
        mtime = self._clock()
        self._objects[key] = (data, mtime, etag)
        return ObjectInfo(key=key, size=len(data), mtime_ns=mtime, etag=etag)

    def _info(self, key: str) -> ObjectInfo:
        if key not in self._objects or key.endswith("/"):
            raise NotFound(key)
        data, mtime, etag = self._objects[key]
        return ObjectInfo(key=key, size=len(data), mtime_ns=mtime, etag=etag)

    # -- the ObjectStore protocol ------------------------------------------

    @property
    def uri(self) -> str:
        return "memory://"

    def check(self) -> None:
        self._enter("check")

    def list_dir(self, prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        self._enter("list_dir")
        base = f"{prefix}/" if prefix else ""
        with self._lock:
            entries: dict[str, ObjectInfo | None] = {}  # S3 key -> object, None: prefix
            for key in self._objects:
                if not key.startswith(base) or key == base:
                    continue
                rest = key[len(base) :]
                if "/" in rest:
                    entries[base + rest.split("/", 1)[0] + "/"] = None
                else:
                    entries[key] = self._info(key)
        ordered = sorted(k for k in entries if token is None or k > token)
        page = ordered[:limit]
        objects = [info for k in page if (info := entries[k]) is not None]
        prefixes = [k[:-1] for k in page if entries[k] is None]
        next_token = page[-1] if len(ordered) > limit else None
        return ListPage(objects=objects, prefixes=prefixes, next_token=next_token)

    def head(self, key: str) -> ObjectInfo:
        self._enter("head")
        with self._lock:
            return self._info(key)

    def get_range(self, key: str, offset: int, length: int, etag: str | None = None) -> bytes:
        self._enter("get_range")
        with self._lock:
            check_version(key, self._info(key).etag, etag)
            return self._objects[key][0][offset : offset + length]

    def get_stream(self, key: str, offset: int) -> BinaryIO:
        self._enter("get_stream")
        with self._lock:
            self._info(key)
            return io.BytesIO(self._objects[key][0][offset:])

    def put_file(self, key: str, path: str, resume: str | None = None) -> ObjectInfo:
        self._enter("put_file")
        with open(path, "rb") as f:
            data = f.read()
        with self._lock:
            return self._put(key, data)

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        self._enter("put_bytes")
        with self._lock:
            return self._put(key, data)

    def delete(self, key: str) -> None:
        self._enter("delete")
        with self._lock:
            self._objects.pop(key, None)

    def validate_key(self, key: str, *, directory: bool = False) -> None:
        validate_s3_key(f"{key}/" if directory else key)

    def make_dir(self, key: str) -> None:
        self._enter("make_dir")
        with self._lock:
            self._put(f"{key}/", b"")

    def remove_dir(self, key: str) -> None:
        self._enter("remove_dir")
        with self._lock:
            self._objects.pop(f"{key}/", None)

    def rename(self, src: str, dst: str, etag: str | None = None) -> ObjectInfo:
        self._enter("rename")
        with self._lock:
            check_version(src, self._info(src).etag, etag)
            validate_s3_key(dst)
            self._objects[dst] = self._objects.pop(src)
            return self._info(dst)

    def rename_dir(self, src: str, dst: str) -> None:
        self._enter("rename_dir")
        with self._lock:
            moved = [k for k in self._objects if k.startswith(f"{src}/")]
            for key in moved:  # like S3ObjectStore.rename_dir: refused before the first move
                validate_s3_key(f"{dst}/{key[len(src) + 1 :]}")
            for key in moved:
                self._objects[f"{dst}/{key[len(src) + 1 :]}"] = self._objects.pop(key)

    def statfs(self) -> tuple[int, int]:
        self._enter("statfs")
        return 1 << 50, 1 << 49
