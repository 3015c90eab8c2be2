"""The small transactional key-value protocol every tree engine implements.

Tree operations (``cloudfs.meta.engine.tree`` and the ``ops_*`` modules) are
written once over this protocol, like JuiceFS's ``tkv`` or 3FS's KV layer, so
an engine (LMDB, etcd; TiKV or FoundationDB later) only has to provide ordered
keys and serializable transactions.

Semantics every engine guarantees (checked by ``tests/contract/test_kv.py``):

* ``transaction(write=True)`` is serializable: it sees its own writes, commits
  all of them when the ``with`` block exits normally and none of them when it
  raises. ``transaction(write=False)`` sees one consistent snapshot; ``put`` and
  ``delete`` in it raise ``ValueError`` (a programming error, not an errno).
* ``scan`` yields ``(key, value)`` pairs whose key starts with ``prefix``, in
  ascending byte order, strictly after ``start_after`` (a full key) when given,
  at most ``limit`` of them. Do not ``put``/``delete`` while a scan iterator is
  still being consumed; materialize it with ``list()`` first.
* A transaction belongs to the thread that opened it, and a thread must not
  open a second transaction while one is open (engines may deadlock or raise).
* Keys are at most 511 bytes (LMDB's limit); values are arbitrary bytes.
* An engine with optimistic concurrency (etcd) may raise
  ``cloudfs.errors.TxnConflict`` from a write transaction (at commit, after
  which nothing of it is applied). Callers open write transactions through
  ``kv_retry.write_txn``, which runs the body again; LMDB and the memory
  engine never raise it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cloudfs.meta.engine.ns_lock import Mutex


class KVTxn(Protocol):
    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or ``None`` when absent."""
        ...

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        """``[get(k) for k in keys]``, in one round trip where the engine is remote."""
        ...

    def put(self, key: bytes, value: bytes) -> None:
        """Insert or replace ``key`` (write transactions only)."""
        ...

    def delete(self, key: bytes) -> None:
        """Remove ``key``; deleting an absent key is not an error (write only)."""
        ...

    def scan(
        self, prefix: bytes, start_after: bytes | None = None, limit: int | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Keys starting with ``prefix`` in ascending order, after ``start_after``."""
        ...


class KVEngine(Protocol):
    def transaction(self, write: bool) -> AbstractContextManager[KVTxn]:
        """A transaction; commits on normal exit of the ``with`` block, aborts on error."""
        ...

    def close(self) -> None:
        """Flush and release the engine; no transaction may be opened afterwards."""
        ...


@runtime_checkable
class SharedKV(KVEngine, Protocol):
    """An engine several tree servers use at once (etcd): it also coordinates them.

    ``mutex`` gives the cross-server namespace lock of one tree
    (``ns_lock.NamespaceLock``); ``watch`` streams every server's committed
    changes, so each server can tell its mounts what the others changed.
    """

    def mutex(self, key: bytes) -> Mutex:
        """The lock stored at ``key``."""
        ...

    def watch(self, key: bytes, end: bytes) -> Watch:
        """The committed changes to keys in [``key``, ``end``) from now on."""
        ...


@dataclass(frozen=True, slots=True)
class WatchEvent:
    key: bytes  # relative to the engine (without its own prefix)
    value: bytes | None  # None: deleted
    revision: int  # the commit's; the events of one commit share it


class Watch(Protocol):
    def __iter__(self) -> Iterator[list[WatchEvent] | None]:
        """Batches of events, one revision never split; ``None``: some were lost."""
        ...

    def close(self) -> None:
        """Stop the iteration (from any thread)."""
        ...
