"""Running write transactions again when they lose an optimistic race (``TxnConflict``).

LMDB and the memory engine serialize writers and never raise ``TxnConflict``,
so over them ``write_txn`` is one transaction, exactly as before. The etcd
engine checks at commit that nothing the transaction read has changed since
its snapshot; when another writer (a thread, or another tree server) got
there first the commit raises ``TxnConflict`` and the transaction's body runs
again from the start, on fresh data, after a short jittered pause.

The unit of retry is one transaction's body, never a whole tree operation: a
body only reads and writes KV keys (and reads the clock), so running it twice
is harmless, whereas the UFS calls that some operations make between their
read and write transactions (delete, rename, make_dir) must not be repeated.
After ``CONFLICT_TRIES`` lost races the caller gets ``RemoteIOError`` (EIO)
with the last conflict as its cause.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from cloudfs.errors import RemoteIOError, TxnConflict
from cloudfs.meta.engine.kv import KVEngine, KVTxn

R = TypeVar("R")

CONFLICT_TRIES = 20
BACKOFF_FIRST = 0.002  # seconds; doubles per lost race up to BACKOFF_MAX, full jitter
BACKOFF_MAX = 0.2


def retry_conflicts(
    fn: Callable[[], R],
    *,
    tries: int = CONFLICT_TRIES,
    sleep: Callable[[float], None] = time.sleep,
) -> R:
    """``fn()``, run again while it raises ``TxnConflict``, at most ``tries`` times.

    Raises:
        RemoteIOError: every try conflicted (the last ``TxnConflict`` is the cause).
    """
    for attempt in range(tries):
        try:
            return fn()
        except TxnConflict as exc:
            last = exc
            if attempt + 1 < tries:
                sleep(random.uniform(0, min(BACKOFF_MAX, BACKOFF_FIRST * 2**attempt)))
    raise RemoteIOError(f"transaction still conflicting after {tries} tries: {last}") from last


def write_txn(kv: KVEngine, body: Callable[[KVTxn], R]) -> R:
    """``body(txn)`` in a write transaction that commits when it returns, retried on conflict.

    ``body`` may run more than once: it must not call the UFS or change
    anything outside the transaction. An exception from it aborts the
    transaction and propagates (only a conflicting commit is retried).
    """

    def once() -> R:
        with kv.transaction(write=True) as txn:
            return body(txn)

    return retry_conflicts(once)
