"""PrefixedKV: one engine's key space under a prefix, so one engine holds many trees.

The tree service keeps every volume's tree in the same engine; each volume's
tree operations see a ``PrefixedKV`` and cannot reach another volume's keys
(every key they use is prefixed, every scan stays inside the prefix), which
is what keeps a client of volume A away from volume B whatever inode numbers
it sends. ``close`` does not close the shared engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from cloudfs.meta.engine.kv import KVEngine, KVTxn


class _PrefixedTxn:
    def __init__(self, txn: KVTxn, prefix: bytes) -> None:
        self._txn = txn
        self._prefix = prefix

    def get(self, key: bytes) -> bytes | None:
        return self._txn.get(self._prefix + key)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        return self._txn.get_many([self._prefix + k for k in keys])

    def put(self, key: bytes, value: bytes) -> None:
        self._txn.put(self._prefix + key, value)

    def delete(self, key: bytes) -> None:
        self._txn.delete(self._prefix + key)

    def scan(
        self, prefix: bytes, start_after: bytes | None = None, limit: int | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        after = None if start_after is None else self._prefix + start_after
        cut = len(self._prefix)
        for key, value in self._txn.scan(self._prefix + prefix, after, limit):
            yield key[cut:], value


class PrefixedKV:
    def __init__(self, engine: KVEngine, prefix: bytes) -> None:
        if not prefix:
            raise ValueError("an empty prefix would share the whole key space")
        self._engine = engine
        self._prefix = prefix

    @contextmanager
    def transaction(self, write: bool) -> Iterator[_PrefixedTxn]:
        with self._engine.transaction(write) as txn:
            yield _PrefixedTxn(txn, self._prefix)

    def close(self) -> None:
        """The shared engine stays open (its owner closes it)."""
