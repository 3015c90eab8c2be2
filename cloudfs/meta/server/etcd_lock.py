"""A mutex in etcd shared by tree servers, with fencing, so a late holder cannot write.

The lock is one key: absent when free; ``<token>:<expiry ns>`` while held.
Taking it is an ordinary optimistic transaction of the engine: read the key,
and if it is free (absent, or past its expiry: its holder died) put our
value; two servers racing both read it free, and the second commit conflicts.
A holder that dies leaves the key behind; it is free again ``hold_for``
seconds later. That bound is on wall clocks, so servers' clocks should agree
to well under it (NTP does).

Expiry alone would let a holder that stalled past it (a long GC pause, a UFS
call timing out) write after someone else took the lock. So while a thread
holds it, every write transaction it commits on the engine first reads the
lock key and checks our token (``EtcdKV`` does this, ``fence``): the key's
``mod_revision`` becomes one of the commit's compares, and a commit after the
lock changed hands conflicts, then fails with ``RemoteIOError`` instead of
writing.

Waiting is polling with jittered, doubling pauses (1 ms up to 50 ms): a tree
change holds the lock for a few etcd round trips, unless it calls the UFS.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cloudfs.errors import RemoteIOError, TxnConflict

if TYPE_CHECKING:
    from cloudfs.meta.server.kv_etcd import EtcdKV

log = logging.getLogger(__name__)

HOLD_FOR = 30.0  # seconds after which a holder's lock is free for others (it died)
WAIT_FOR = 30.0  # seconds an acquire waits before EIO
PAUSE_FIRST, PAUSE_MAX = 0.001, 0.05


class _Held(Exception):
    """Someone else holds the lock."""


class EtcdMutex:
    """The lock at ``key`` (relative to ``kv``'s prefix)."""

    def __init__(
        self,
        kv: EtcdKV,
        key: bytes,
        *,
        hold_for: float = HOLD_FOR,
        wait_for: float = WAIT_FOR,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._kv = kv
        self.key = key
        self._hold_ns = int(hold_for * 1e9)
        self._wait_for = wait_for
        self._clock = clock
        self._token = b""

    def acquire(self) -> None:
        token = os.urandom(8).hex().encode()
        deadline = time.monotonic() + self._wait_for
        pause = PAUSE_FIRST
        while True:
            try:
                self._take(token)
                break
            except (_Held, TxnConflict):
                if time.monotonic() > deadline:
                    raise RemoteIOError(
                        f"the namespace lock {self.key!r} stayed held for {self._wait_for:.0f} s"
                    ) from None
                time.sleep(random.uniform(pause / 2, pause))
                pause = min(PAUSE_MAX, pause * 2)
        self._token = token
        self._kv.fence(self.key, token)

    def _take(self, token: bytes) -> None:
        now = self._clock()
        with self._kv.transaction(write=True) as txn:
            held = txn.get(self.key)
            if held is not None and _expiry(held) > now:
                raise _Held
            txn.put(self.key, token + b":" + str(now + self._hold_ns).encode())

    def release(self) -> None:
        token, self._token = self._token, b""
        self._kv.fence(self.key, None)
        try:
            with self._kv.transaction(write=True) as txn:
                held = txn.get(self.key)
                if held is not None and held.split(b":", 1)[0] == token:
                    txn.delete(self.key)
        except (RemoteIOError, TxnConflict) as exc:  # it expires by itself
            log.warning("could not release the namespace lock %r: %s", self.key, exc)


def _expiry(value: bytes) -> int:
    try:
        return int(value.split(b":", 1)[1])
    except (IndexError, ValueError):
        return 0  # not ours to understand: treat as free
