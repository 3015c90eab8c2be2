"""A mutex in etcd shared by tree servers, with fencing, so a late holder cannot write.

The lock is one key: absent when free; ``<token>:<expiry ns>`` while held.
Taking it is one etcd Txn: "if the key does not exist, put our value; else
read it". When the value read is past its expiry (its holder died), a second
Txn takes it over if it is still that value. A holder that dies leaves the
key behind; it is free again ``hold_for`` seconds later. That bound is on wall
clocks, so servers' clocks should agree to well under it (NTP does).
Releasing is one Txn: "if the key is still the one we put, delete it".

Expiry alone would let a holder that stalled past it (a long GC pause, a UFS
call timing out) write after someone else took the lock. So while a thread
holds it, every write transaction it commits on the engine also compares the
lock key's ``mod_revision`` with the one our put created (``Fence``; it costs
no round trip): a commit after the lock changed hands fails, and fails with
``RemoteIOError`` instead of writing.

Waiting is polling with jittered, doubling pauses (1 ms up to 50 ms): a tree
change holds the lock for a few etcd round trips, unless it calls the UFS.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cloudfs.errors import RemoteIOError
from cloudfs.etcdpb import rpc_pb2 as pb

if TYPE_CHECKING:
    from cloudfs.meta.engine.kv_etcd import EtcdKV

log = logging.getLogger(__name__)

HOLD_FOR = 30.0  # seconds after which a holder's lock is free for others (it died)
# seconds an acquire waits before EIO: past a dead holder's expiry, so that a server
# that starts waiting just before a holder dies still gets the lock when it expires
WAIT_FOR = HOLD_FOR + 10.0
PAUSE_FIRST, PAUSE_MAX = 0.001, 0.05
MOD, CREATE, EQUAL = pb.Compare.MOD, pb.Compare.CREATE, pb.Compare.EQUAL


@dataclass(frozen=True, slots=True)
class Fence:
    """The lock key as its holder left it (``EtcdKV.fence``)."""

    key: bytes  # relative to the engine's prefix
    value: bytes
    mod_revision: int


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
        self._full = kv.prefix + key
        self._hold_ns = int(hold_for * 1e9)
        self._wait_for = wait_for
        self._clock = clock
        self._held: Fence | None = None

    def acquire(self) -> None:
        token = os.urandom(8).hex().encode()
        deadline = time.monotonic() + self._wait_for
        pause = PAUSE_FIRST
        while (held := self._take(token)) is None:
            if time.monotonic() > deadline:
                raise RemoteIOError(
                    f"the namespace lock {self.key!r} stayed held for {self._wait_for:.0f} s"
                )
            time.sleep(random.uniform(pause / 2, pause))
            pause = min(PAUSE_MAX, pause * 2)
        self._held = held
        self._kv.fence(held)

    def _take(self, token: bytes) -> Fence | None:
        """One try: our Fence if we now hold the lock, None if someone else does."""
        value = token + b":" + str(self._clock() + self._hold_ns).encode()
        put = pb.RequestOp(request_put=pb.PutRequest(key=self._full, value=value))
        read = pb.RequestOp(request_range=pb.RangeRequest(key=self._full))
        free = pb.Compare(key=self._full, target=CREATE, result=EQUAL, create_revision=0)
        answer = self._txn([free], [put], [read])
        if answer.succeeded:
            return Fence(self.key, value, answer.header.revision)
        kvs = answer.responses[0].response_range.kvs
        if not kvs:
            return None  # released meanwhile: the next try takes it
        current, mod = kvs[0].value, kvs[0].mod_revision
        if current.split(b":", 1)[0] == token:  # our own put, whose answer was lost
            return Fence(self.key, current, mod)
        if _expiry(current) > self._clock():
            return None
        log.warning("taking over the namespace lock %r from a holder that let it expire", self.key)
        same = pb.Compare(key=self._full, target=MOD, result=EQUAL, mod_revision=mod)
        answer = self._txn([same], [put], [])
        if answer.succeeded:
            return Fence(self.key, value, answer.header.revision)
        return None

    def _txn(
        self, compare: list[pb.Compare], success: list[pb.RequestOp], failure: list[pb.RequestOp]
    ) -> pb.TxnResponse:
        # Sending a take again is safe: its compare fails if the first one was applied,
        # and the read then shows our own token.
        return self._kv.txn(pb.TxnRequest(compare=compare, success=success, failure=failure))

    def lend(self) -> None:
        """Keep the lock taken for another thread of this process (``resume``)."""
        self._kv.fence(None)  # this thread's writes are no longer the holder's

    def resume(self) -> None:
        """Hold the lock a ``lend`` kept taken in this thread (its writes fenced)."""
        if self._held is None:
            self.acquire()
            return
        self._kv.fence(self._held)

    def release(self) -> None:
        held, self._held = self._held, None
        self._kv.fence(None)
        if held is None:
            return
        ours = pb.Compare(key=self._full, target=MOD, result=EQUAL, mod_revision=held.mod_revision)
        delete = pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=self._full))
        try:
            self._txn([ours], [delete], [])
        except RemoteIOError as exc:  # it expires by itself
            log.warning("could not release the namespace lock %r: %s", self.key, exc)


def _expiry(value: bytes) -> int:
    try:
        return int(value.split(b":", 1)[1])
    except (IndexError, ValueError):
        return 0  # not ours to understand: treat as free
