"""The embedded KV engine: one LMDB environment in the mount process.

Durability trade-off: the environment is opened with ``sync=False`` and
``metasync=False``. A committed transaction is in the OS page cache, so it
survives the process being killed (``kill -9``, a crash); only a power loss or
kernel crash can lose the last seconds of commits. What could be lost is
tree-only state (modes, xattrs, symlinks, hard links): file bytes live in the
UFS and are re-discovered by listing. ``close`` calls ``env.sync()``.

LMDB serializes write transactions itself (one writer at a time, across
threads) and gives every read transaction a snapshot, which is exactly the
protocol's isolation. ``buffers=False`` makes every value a private ``bytes``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import lmdb

from cloudfs.errors import FsError, NoSpace

DEFAULT_MAP_SIZE = 1 << 36  # 64 GiB of address space; the file grows as needed


class _LmdbTxn:
    def __init__(self, txn: Any, write: bool) -> None:
        self._txn = txn
        self._write = write

    def get(self, key: bytes) -> bytes | None:
        value = self._txn.get(key)
        return None if value is None else bytes(value)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        return [self.get(k) for k in keys]

    def put(self, key: bytes, value: bytes) -> None:
        if not self._write:
            raise ValueError("write in a read-only transaction")
        self._txn.put(key, value)

    def delete(self, key: bytes) -> None:
        if not self._write:
            raise ValueError("write in a read-only transaction")
        self._txn.delete(key)

    def scan(
        self, prefix: bytes, start_after: bytes | None = None, limit: int | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        cursor = self._txn.cursor()
        start = start_after if start_after is not None and start_after >= prefix else prefix
        if not cursor.set_range(start):
            return
        count = 0
        for key, value in cursor.iternext(keys=True, values=True):
            if limit is not None and count >= limit:
                return
            key = bytes(key)
            if start_after is not None and key == start_after:
                continue
            if not key.startswith(prefix):
                return
            yield key, bytes(value)
            count += 1


class LmdbKV:
    """A ``KVEngine`` over an LMDB environment in directory ``path``."""

    def __init__(self, path: str, *, map_size: int = DEFAULT_MAP_SIZE) -> None:
        os.makedirs(path, exist_ok=True)
        self._env = lmdb.open(
            path,
            map_size=map_size,
            subdir=True,
            sync=False,
            metasync=False,
            max_readers=256,
        )

    @contextmanager
    def transaction(self, write: bool) -> Iterator[_LmdbTxn]:
        txn = self._env.begin(write=write, buffers=False)
        try:
            yield _LmdbTxn(txn, write)
        except lmdb.MapFullError as exc:
            txn.abort()
            raise NoSpace("metadata store is full") from exc
        except BaseException:
            txn.abort()
            raise
        try:
            if write:
                txn.commit()
            else:
                txn.abort()
        except lmdb.MapFullError as exc:
            raise NoSpace("metadata store is full") from exc
        except lmdb.Error as exc:
            raise FsError(f"metadata store failed: {exc}") from exc

    def close(self) -> None:
        self._env.sync(True)
        self._env.close()
