"""``ForwardingObjectStore``: an ObjectStore that passes every call to another one.

The base of the wrappers (``faults.FaultyObjectStore``, ``metered.MeteredObjectStore``):
each request goes through one hook, ``_call(op, fn)``, so a wrapper that does the
same around every request overrides that hook, and one that changes a method's
result (counting its bytes, say) overrides that method and calls ``super()``.
Nothing else needs writing, and a method added to the protocol is added here once
(``tests/unit/test_ufs_forwarding.py`` checks that every one is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO, TypeVar

from cloudfs.types import ListPage, ObjectInfo
from cloudfs.ufs.interface import ObjectStore

T = TypeVar("T")

# The op names that ``_call`` sees: the protocol's methods that make a request.
# ``uri`` and ``validate_key`` (pure, no request) go straight to the inner store.
OPS = frozenset(
    {
        "check",
        "list_dir",
        "head",
        "get_range",
        "get_stream",
        "put_file",
        "put_bytes",
        "delete",
        "make_dir",
        "remove_dir",
        "rename",
        "rename_dir",
        "statfs",
    }
)


class ForwardingObjectStore:
    """Every ObjectStore method forwarded to ``inner``; each request through ``_call``."""

    def __init__(self, inner: ObjectStore) -> None:
        self._inner = inner

    @property
    def inner(self) -> ObjectStore:
        return self._inner

    def _call(self, op: str, fn: Callable[[], T]) -> T:
        """Make request ``op`` (a name in ``OPS``): ``fn()`` calls the inner store."""
        return fn()

    # -- ObjectStore ---------------------------------------------------------

    @property
    def uri(self) -> str:
        return self._inner.uri

    def validate_key(self, key: str, *, directory: bool = False) -> None:
        self._inner.validate_key(key, directory=directory)

    def check(self) -> None:
        self._call("check", self._inner.check)

    def list_dir(self, prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        return self._call("list_dir", lambda: self._inner.list_dir(prefix, token, limit))

    def head(self, key: str) -> ObjectInfo:
        return self._call("head", lambda: self._inner.head(key))

    def get_range(self, key: str, offset: int, length: int, etag: str | None = None) -> bytes:
        return self._call("get_range", lambda: self._inner.get_range(key, offset, length, etag))

    def get_stream(self, key: str, offset: int) -> BinaryIO:
        return self._call("get_stream", lambda: self._inner.get_stream(key, offset))

    def put_file(self, key: str, path: str, resume: str | None = None) -> ObjectInfo:
        return self._call("put_file", lambda: self._inner.put_file(key, path, resume))

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        return self._call("put_bytes", lambda: self._inner.put_bytes(key, data))

    def delete(self, key: str) -> None:
        self._call("delete", lambda: self._inner.delete(key))

    def make_dir(self, key: str) -> None:
        self._call("make_dir", lambda: self._inner.make_dir(key))

    def remove_dir(self, key: str) -> None:
        self._call("remove_dir", lambda: self._inner.remove_dir(key))

    def rename(self, src: str, dst: str, etag: str | None = None) -> ObjectInfo:
        return self._call("rename", lambda: self._inner.rename(src, dst, etag))

    def rename_dir(self, src: str, dst: str) -> None:
        self._call("rename_dir", lambda: self._inner.rename_dir(src, dst))

    def statfs(self) -> tuple[int, int]:
        return self._call("statfs", self._inner.statfs)
