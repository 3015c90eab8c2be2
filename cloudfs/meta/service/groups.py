"""CacheGroups: who is in a cache group now, kept in the tree service's KV engine.

A cache group (``cloudfs/peers``) is a name and the ``HOST:PORT`` of each
member serving BlockCache. Members join with a TTL and renew it by joining
again (a heartbeat); a member that stopped renewing (killed, its node gone,
cut off) is no longer listed once its TTL has passed, so mounts stop asking
it without anyone having to notice it died. This is the session pattern of
``meta/engine/ops_session.py``: an expiry stored per record, filtered on
read, removed by the server's janitor.

Records are ``G:<group>\\0<address>`` -> expiry (ns since the epoch, u64) in
the engine itself, beside the volumes (``V:``) and trees (``T``): groups
belong to no volume. Why the shape:

* ``join`` is one blind put (no read): over etcd, a hundred members
  heartbeating the same group never conflict with each other.
* ``members`` filters by expiry, so what it returns never depends on when
  the janitor last ran; ``expire`` only reclaims space, re-checking each
  record in the deleting transaction so a member that just renewed stays.
* Expiry is by the clock of the server that took the heartbeat: several
  servers over one etcd must keep their clocks within a fraction of a TTL
  (NTP does), as for sessions.

Thread-safe (each call is its own transaction). Errors: ``InvalidArgument``
(EINVAL) for a bad group name, address or TTL; the engine's own (EIO).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from cloudfs.errors import InvalidArgument
from cloudfs.meta.engine import codec
from cloudfs.meta.engine.kv import KVEngine, KVTxn
from cloudfs.meta.engine.kv_retry import write_txn
from cloudfs.meta.wire.groups import validate_group_name, validate_member_address

GROUP_PREFIX = b"G:"
DEFAULT_TTL_MS = 10_000
MIN_TTL_MS = 1_000
MAX_TTL_MS = 300_000
EXPIRE_BATCH = 200


def _group_prefix(group: str) -> bytes:
    return GROUP_PREFIX + group.encode() + b"\0"


def _member_key(group: str, address: str) -> bytes:
    return _group_prefix(group) + address.encode()


class CacheGroups:
    def __init__(self, engine: KVEngine, *, clock: Callable[[], int] = time.time_ns) -> None:
        """``clock``: ns since the epoch (injectable for tests)."""
        self._engine = engine
        self._clock = clock

    def join(self, group: str, address: str, ttl_ms: int = 0) -> int:
        """List ``address`` in ``group`` for ``ttl_ms`` from now (0: ``DEFAULT_TTL_MS``);
        joining again renews it. Returns the expiry (ns). Idempotent."""
        validate_group_name(group)
        validate_member_address(address)
        ttl = ttl_ms or DEFAULT_TTL_MS
        if not MIN_TTL_MS <= ttl <= MAX_TTL_MS:
            raise InvalidArgument(f"ttl_ms {ttl_ms} is not within {MIN_TTL_MS}..{MAX_TTL_MS}")
        expiry = self._clock() + ttl * 1_000_000
        key = _member_key(group, address)
        write_txn(self._engine, lambda txn: txn.put(key, codec.u64(expiry)))
        return expiry

    def leave(self, group: str, address: str) -> None:
        """Stop listing ``address`` in ``group`` now (not an error if it was not listed)."""
        validate_group_name(group)
        validate_member_address(address)
        key = _member_key(group, address)
        write_txn(self._engine, lambda txn: txn.delete(key))

    def members(self, group: str) -> list[str]:
        """The live members of ``group`` (sorted); an unknown group has none."""
        validate_group_name(group)
        prefix = _group_prefix(group)
        now = self._clock()
        with self._engine.transaction(write=False) as txn:
            return [
                key[len(prefix) :].decode()
                for key, value in txn.scan(prefix)
                if codec.from_u64(value) >= now
            ]

    def expire(self) -> int:
        """Delete every member record past its expiry (all groups); returns how many."""
        now = self._clock()
        with self._engine.transaction(write=False) as txn:
            stale = [key for key, value in txn.scan(GROUP_PREFIX) if codec.from_u64(value) < now]
        removed = 0
        for start in range(0, len(stale), EXPIRE_BATCH):
            removed += write_txn(
                self._engine,
                partial(_delete_expired, keys=stale[start : start + EXPIRE_BATCH], now=now),
            )
        return removed


def _delete_expired(txn: KVTxn, keys: list[bytes], now: int) -> int:
    """Delete those of ``keys`` still expired at ``now`` (a renewal since the scan stays)."""
    removed = 0
    for key, value in zip(keys, txn.get_many(keys), strict=True):
        if value is not None and codec.from_u64(value) < now:
            txn.delete(key)
            removed += 1
    return removed
