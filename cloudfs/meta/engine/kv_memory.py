"""An in-memory KV engine for unit tests (and the reference for the protocol).

One re-entrant lock is held for the whole of every transaction, read or
write, so transactions are trivially serializable. A write transaction applies
its changes in place and keeps an undo log, so aborting restores the previous
values. Keys are kept in a sorted list so ``scan`` is a bisect plus a walk.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _MemoryTxn:
    def __init__(self, kv: MemoryKV, write: bool) -> None:
        self._kv = kv
        self._write = write
        self._undo: dict[bytes, bytes | None] = {}
        self.active = True

    def _check(self, writing: bool = False) -> None:
        if not self.active:
            raise ValueError("transaction is finished")
        if writing and not self._write:
            raise ValueError("write in a read-only transaction")

    def get(self, key: bytes) -> bytes | None:
        self._check()
        return self._kv._data.get(key)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        return [self.get(k) for k in keys]

    def put(self, key: bytes, value: bytes) -> None:
        self._check(writing=True)
        self._undo.setdefault(key, self._kv._data.get(key))
        self._kv._set(key, bytes(value))

    def delete(self, key: bytes) -> None:
        self._check(writing=True)
        if key in self._kv._data:
            self._undo.setdefault(key, self._kv._data[key])
            self._kv._del(key)

    def scan(
        self, prefix: bytes, start_after: bytes | None = None, limit: int | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        self._check()
        keys = self._kv._keys
        if start_after is not None and start_after >= prefix:
            index = bisect.bisect_right(keys, start_after)
        else:
            index = bisect.bisect_left(keys, prefix)
        count = 0
        while limit is None or count < limit:
            self._check()
            if index >= len(keys) or not keys[index].startswith(prefix):
                return
            key = keys[index]
            yield key, self._kv._data[key]
            count += 1
            # Re-bisect from the last key: robust even if the caller broke the
            # "no writes while scanning" rule.
            index = bisect.bisect_right(keys, key)

    def rollback(self) -> None:
        for key, old in self._undo.items():
            if old is None:
                self._kv._del(key)
            else:
                self._kv._set(key, old)
        self._undo.clear()


class MemoryKV:
    """A ``KVEngine`` held in a dict; nothing survives the process."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []
        self._lock = threading.RLock()
        self._in_txn = threading.local()
        self._closed = False

    def _set(self, key: bytes, value: bytes) -> None:
        if key not in self._data:
            bisect.insort(self._keys, key)
        self._data[key] = value

    def _del(self, key: bytes) -> None:
        if self._data.pop(key, None) is not None:
            index = bisect.bisect_left(self._keys, key)
            del self._keys[index]

    @contextmanager
    def transaction(self, write: bool) -> Iterator[_MemoryTxn]:
        if self._closed:
            raise ValueError("engine is closed")
        if getattr(self._in_txn, "open", False):
            # LMDB would deadlock here; fail loudly in unit tests instead.
            raise RuntimeError("nested KV transaction in one thread")
        with self._lock:
            self._in_txn.open = True
            txn = _MemoryTxn(self, write)
            try:
                yield txn
            except BaseException:
                txn.rollback()
                raise
            finally:
                txn.active = False
                self._in_txn.open = False

    def close(self) -> None:
        self._closed = True
