"""Reservations: what a namespace change calling the UFS keeps lock-free creates out of.

Creates of files, fifos, sockets, devices and symlinks only write the tree,
so they run without the namespace lock (``EmbeddedMeta``): each is one
transaction over the keys it reads and writes, and over etcd two creates
conflict only when they touch the same keys. The changes that call the UFS
between planning and committing (mkdir, rename, rmdir) still hold the lock
among themselves, but a create could slip in between their plan and their
commit and take the very name they are making in the UFS, or put a name in
the directory they are removing. So such a change first commits a
reservation, in the transaction that plans it:

* mkdir and rename reserve the name they make (``reserved_name_key``);
* rmdir reserves the directory it removes (``reserved_dir_key``);

and drops it in the transaction that commits the change (or after a failed
UFS call). A create reads both keys of its (parent, name) in its
transaction; finding a live one, it waits and tries again (``wait_out``).
Over etcd the two transactions read each other's keys, so whichever commits
second sees the first or conflicts and runs again: never both.

A reservation carries its expiry: one left by a server that died mid-change
is ignored after ``HOLD_FOR`` seconds.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from cloudfs.errors import RemoteIOError
from cloudfs.meta.engine import codec
from cloudfs.meta.engine.kv import KVEngine, KVTxn
from cloudfs.meta.engine.kv_retry import write_txn

R = TypeVar("R")

HOLD_FOR = 60.0  # seconds a reservation lives: more than any UFS call with its retries
PAUSE_FIRST = 0.002  # seconds between a waiting create's tries, doubling
PAUSE_MAX = 0.1


class Reserved(Exception):
    """A key a transaction needs is reserved until ``until`` (ns since the epoch)."""

    def __init__(self, until: int) -> None:
        super().__init__(f"reserved until {until}")
        self.until = until


def check(txn: KVTxn, keys: list[bytes], now: int) -> None:
    """Raise ``Reserved`` if one of ``keys`` holds a live reservation."""
    for value in txn.get_many(keys):
        if value is not None and codec.from_u64(value) > now:
            raise Reserved(codec.from_u64(value))


def hold(txn: KVTxn, keys: list[bytes], now: int) -> None:
    """Reserve ``keys`` (the caller holds the namespace lock: no other holder can
    have a live one, and creates never take them)."""
    until = codec.u64(now + int(HOLD_FOR * 1e9))
    for key in keys:
        txn.put(key, until)


def drop(txn: KVTxn, keys: list[bytes]) -> None:
    for key in keys:
        txn.delete(key)


def drop_now(kv: KVEngine, keys: list[bytes]) -> None:
    """Drop ``keys`` in a transaction of their own (after a failed UFS call)."""
    write_txn(kv, lambda txn: drop(txn, keys))


def wait_out(fn: Callable[[], R], clock: Callable[[], int]) -> R:
    """``fn()``, run again while it raises ``Reserved``, until the reservation expires.

    Raises:
        RemoteIOError: still reserved past its expiry (a clock far off between servers).
    """
    pause = PAUSE_FIRST
    deadline: int | None = None
    while True:
        try:
            return fn()
        except Reserved as exc:
            if deadline is None:
                deadline = exc.until + int(5e9)
            if clock() > deadline:
                raise RemoteIOError("a name stayed reserved past its expiry") from exc
            time.sleep(random.uniform(pause / 2, pause))
            pause = min(PAUSE_MAX, pause * 2)
