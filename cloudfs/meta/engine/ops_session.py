"""Sessions: which mount holds which inodes open, and what happens when a mount dies.

A mount of a shared tree opens a session (its id travels with every call) and
renews it (``heartbeat``) well within ``SESSION_TTL``. Opens and releases are
counted per session (``Q<session-len><session><inode>``) as well as per inode
(``O<inode>``, what the tree operations read), so an inode unlinked while open
in any mount stays until the last of them releases it. A session that stopped
renewing (the mount was killed, its node died) expires: ``expire_sessions``
gives back its opens and frees the unlinked inodes nobody holds any more.
Session records are ``Z<session>`` -> expiry (ns since the epoch).

The embedded tree has no sessions (session ``""``): one process holds
everything and ``init_volume`` clears its open counts at start.
"""

from __future__ import annotations

from cloudfs.errors import InvalidArgument
from cloudfs.meta.engine import codec, tree
from cloudfs.meta.engine.context import TreeContext
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.kv_retry import write_txn

SESSION_TTL_NS = 60 * 10**9
MAX_SESSION = 64
SESSION_PREFIX = b"Z"
HELD_PREFIX = b"Q"
EXPIRE_BATCH = 200


def _session_key(session: str) -> bytes:
    return SESSION_PREFIX + session.encode()


def _held_prefix(session: str) -> bytes:
    raw = session.encode()
    return HELD_PREFIX + bytes([len(raw)]) + raw


def _held_key(session: str, ino: int) -> bytes:
    return _held_prefix(session) + codec.u64(ino)


def validate_session(session: str) -> None:
    if not session or len(session) > MAX_SESSION or not session.isalnum():
        raise InvalidArgument(f"bad session id {session!r}")


def heartbeat(ctx: TreeContext, session: str) -> int:
    """Open or renew ``session``; returns its new expiry (ns)."""
    validate_session(session)
    expiry = ctx.clock() + SESSION_TTL_NS
    write_txn(ctx.kv, lambda txn: txn.put(_session_key(session), codec.u64(expiry)))
    return expiry


def hold_keys(session: str, ino: int) -> list[bytes]:
    """The keys ``held`` reads (for a caller that reads them all at once first)."""
    return [_held_key(session, ino), _session_key(session)] if session else []


def held(txn: KVTxn, session: str, ino: int, delta: int, now_ns: int) -> None:
    """Count ``delta`` more opens of ``ino`` by ``session`` (inside the open/release txn)."""
    key = _held_key(session, ino)
    data = txn.get(key)
    count = (0 if data is None else codec.from_u64(data)) + delta
    if count > 0:
        txn.put(key, codec.u64(count))
    else:
        txn.delete(key)
    if txn.get(_session_key(session)) is None:  # an open before the first heartbeat
        txn.put(_session_key(session), codec.u64(now_ns + SESSION_TTL_NS))


def expire_sessions(ctx: TreeContext) -> int:
    """End every session past its expiry; returns how many ended."""
    now = ctx.clock()
    with ctx.kv.transaction(write=False) as txn:
        expired = [
            key[1:].decode()
            for key, value in txn.scan(SESSION_PREFIX)
            if codec.from_u64(value) < now
        ]
    for session in expired:
        end_session(ctx, session)
    return len(expired)


def end_session(ctx: TreeContext, session: str) -> None:
    """Give back every open of ``session`` and forget it (a clean unmount, or expiry)."""

    def give_back(txn: KVTxn) -> bool:
        """One batch; True when the session is gone."""
        held_keys = list(txn.scan(_held_prefix(session), limit=EXPIRE_BATCH))
        for key, value in held_keys:
            ino = codec.from_u64(key[-8:])
            remaining = tree.open_count(txn, ino) - codec.from_u64(value)
            txn.delete(key)
            if remaining > 0:
                txn.put(codec.open_key(ino), codec.u64(remaining))
                continue
            txn.delete(codec.open_key(ino))
            rec = tree.find(txn, ino)
            if rec is not None and rec.nlink == 0:
                tree.free_inode(txn, ino)
        if len(held_keys) < EXPIRE_BATCH:
            txn.delete(_session_key(session))
            return True
        return False

    while not write_txn(ctx.kv, give_back):
        pass
