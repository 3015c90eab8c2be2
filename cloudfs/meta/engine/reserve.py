"""Reservations: how namespace changes that call the UFS run without a volume-wide lock.

A change that touches the UFS between planning and committing (mkdir, unlink,
rmdir, rename) cannot be one transaction: the UFS call must not be repeated
when the transaction conflicts. So it plans in a first transaction that also
**reserves** every name and inode its decision rests on, calls the UFS, and
commits in a second transaction that drops them (``in_ufs``). While a
reservation lives, any other change that needs the same name or inode waits
(``wait_out``): a create of that name, an unlink of that file, a link to it,
a rename onto it, an upload's commit of it. Changes of other names and other
inodes never wait for each other, on one tree server or several.

* ``reserved_name_key(parent, name)``: a name being made, removed or renamed;
* ``reserved_inode_key(ino)``: an inode whose UFS object (or directory
  marker) is being moved or deleted, or a directory being removed (no new
  name goes in).

Changes that only write the tree (create, mknod, symlink, link, the commits
of uploads) are one transaction that reads the reservations it must respect,
so over etcd whichever of two such transactions commits second sees the other
or conflicts and runs again: never both. A listing merge leaves reserved
names alone (``reserved_names``): the UFS may be half-way through them.
A directory counts as empty (``check_empty``: rmdir, a rename onto it) only
when no name in it is reserved either: a mkdir or rename into it reserves the
new name before the UFS call and adds it after, and a removal decided in
between would leave that name in a directory that is gone.

One change is still exclusive: a rename that moves a directory present in
the UFS changes the keys of everything below it, which no per-name
reservation covers. It takes the **fence** (``FENCE_KEY``) in its plan
transaction, with the namespace lock held, and waits until every other
reservation is gone (``wait_clear``); every planned change checks the fence
and waits while it lives. Training workloads rarely rename directories.

A reservation carries its expiry: one left by a server that died mid-change
is ignored after ``HOLD_FOR`` seconds.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from cloudfs.errors import FsError, NotEmpty, RemoteIOError
from cloudfs.meta.engine import codec, tree
from cloudfs.meta.engine.kv import KVEngine, KVTxn
from cloudfs.meta.engine.kv_retry import write_txn

log = logging.getLogger(__name__)

P = TypeVar("P")
T = TypeVar("T")

HOLD_FOR = 30.0  # seconds a reservation outlives a dead holder: as the namespace lock (etcd_lock)
PAUSE_FIRST = 0.002  # seconds between a waiting change's tries, doubling
PAUSE_MAX = 0.1
FENCE_KEY = b"F"


class Reserved(Exception):
    """A key a transaction needs is reserved until ``until`` (ns since the epoch)."""

    def __init__(self, until: int) -> None:
        super().__init__(f"reserved until {until}")
        self.until = until


def _live(value: bytes | None, now: int) -> bool:
    return value is not None and codec.from_u64(value) > now


def check(txn: KVTxn, keys: list[bytes], now: int, *, fence: bool = False) -> None:
    """Raise ``Reserved`` if one of ``keys`` (or, with ``fence``, the fence) is live."""
    wanted = [*keys, FENCE_KEY] if fence else keys
    for value in txn.get_many(wanted):
        if value is not None and _live(value, now):
            raise Reserved(codec.from_u64(value))


def hold(txn: KVTxn, keys: list[bytes], now: int) -> None:
    """Reserve ``keys`` (after ``check``ing them in the same transaction)."""
    until = codec.u64(now + int(HOLD_FOR * 1e9))
    for key in keys:
        txn.put(key, until)


def drop(txn: KVTxn, keys: list[bytes]) -> None:
    for key in keys:
        txn.delete(key)


def drop_now(kv: KVEngine, keys: list[bytes]) -> None:
    """Drop ``keys`` in a transaction of their own (after a failed UFS call)."""
    write_txn(kv, lambda txn: drop(txn, keys))


def check_empty(txn: KVTxn, dir_ino: int, now: int | None) -> None:
    """What removing directory ``dir_ino`` decides on (rmdir, a rename onto it):
    ``NotEmpty`` if it has a name, ``Reserved`` while a change in flight holds one (a
    mkdir or rename into it has reserved its new name but not yet added it). ``now``
    None: the names only (a commit whose plan's reservations keep new names out)."""
    if tree.has_children(txn, dir_ino):
        raise NotEmpty("directory not empty")
    if now is None:
        return
    for _, until in _held_names(txn, dir_ino, now):
        raise Reserved(until)


def reserved_names(txn: KVTxn, dir_ino: int, now: int) -> set[bytes]:
    """The names of directory ``dir_ino`` that a change in flight holds."""
    return {name for name, _ in _held_names(txn, dir_ino, now)}


def _held_names(txn: KVTxn, dir_ino: int, now: int) -> Iterator[tuple[bytes, int]]:
    """(name, until) of each live reservation of a name in directory ``dir_ino``."""
    prefix = codec.reserved_inode_key(dir_ino)  # its names' keys start with it
    for key, value in txn.scan(prefix):
        if len(key) > len(prefix) and _live(value, now):
            yield key[len(prefix) :], codec.from_u64(value)


def wait_out(fn: Callable[[], T], clock: Callable[[], int]) -> T:
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
            if deadline is None or exc.until + int(5e9) > deadline:
                deadline = exc.until + int(5e9)
            if clock() > deadline:
                raise RemoteIOError("a name stayed reserved past its expiry") from exc
            time.sleep(random.uniform(pause / 2, pause))
            pause = min(PAUSE_MAX, pause * 2)


def wait_clear(kv: KVEngine, own: list[bytes], clock: Callable[[], int]) -> None:
    """Wait until no reservation but ``own`` lives (the fence holder, before its UFS call)."""
    mine = set(own)

    def others() -> None:
        now = clock()
        with kv.transaction(write=False) as txn:
            for key, value in txn.scan(b"R"):
                if key not in mine and _live(value, now):
                    raise Reserved(codec.from_u64(value))

    wait_out(others, clock)


def in_ufs(
    kv: KVEngine,
    clock: Callable[[], int],
    plan: Callable[[KVTxn], tuple[P, list[bytes]]],
    ufs: Callable[[P], object],
    apply: Callable[[KVTxn, P], T],
    *,
    fence: bool = False,
) -> T:
    """A change that calls the UFS: ``plan`` (returning the plan and the keys to reserve)
    in a transaction that reserves them, ``ufs(plan)``, then ``apply`` in a transaction
    that drops them. ``fence``: take the fence too and wait for the others first (the
    caller holds the namespace lock)."""
    held: list[bytes] = []

    def plan_and_hold(txn: KVTxn) -> P:
        planned, keys = plan(txn)
        now = clock()
        check(txn, keys, now, fence=True)  # nobody else's, nor a fence
        wanted = [*keys, FENCE_KEY] if fence else keys
        hold(txn, wanted, now)
        held[:] = wanted
        return planned

    planned = wait_out(lambda: write_txn(kv, plan_and_hold), clock)

    def apply_and_drop(txn: KVTxn) -> T:
        drop(txn, held)
        return apply(txn, planned)

    try:
        if fence:
            wait_clear(kv, held, clock)
        ufs(planned)
        return write_txn(kv, apply_and_drop)
    except BaseException:
        try:
            drop_now(kv, held)
        except FsError as exc:  # the caller gets the change's own error; these expire
            log.warning("could not drop reservations after a failed change: %s", exc)
        raise
