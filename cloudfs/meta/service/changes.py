"""Change feeds: which inodes and names a committed tree transaction touched, for watchers.

Mounts of one volume cache attributes and names in their kernels. So that an
``open`` in mount B sees what mount A just wrote and closed (close-to-open),
the server tells every other mount what changed the moment it commits:
``WatchedKV`` wraps a volume's engine, notes the keys each write transaction
puts or deletes, and after the commit publishes them to the volume's
``ChangeFeed`` as a ``Change``: inodes whose record changed (``I`` keys:
size, times, ETag, mode...) and directory entries added or removed (``D``
keys). A change carries the session that caused it (``origin``, set per
request thread by the server), so its own mount can skip it.

A UFS listing merged for one mount's call is that mount's commit too, so it
would not hear of it; the tree tells it explicitly (``listing_changed``,
``ChangeFeed.publish_to``). Listings merged in the background run in no
session and reach every mount.

Subscribers get a bounded queue each; one that falls ``QUEUE_LIMIT`` changes
behind is told it lost some (``Change.lost``) and starts over, instead of
the server buffering without bound.

A single server sees every write of its engine. Several servers on one etcd
each see only their own, so there ``WatchedKV`` publishes nothing itself: it
writes the origin session into each changing transaction (``codec.ORIGIN_KEY``),
and every server learns every commit, with its origin, from etcd's watch
(``change_pump``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from cloudfs.meta.engine import codec
from cloudfs.meta.engine.kv import KVEngine, KVTxn
from cloudfs.meta.interface import Invalidation

QUEUE_LIMIT = 10_000

_origin = threading.local()


@contextmanager
def origin(session: str) -> Iterator[None]:
    """Attribute the writes made by this thread in the block to ``session``."""
    previous = getattr(_origin, "session", "")
    _origin.session = session
    try:
        yield
    finally:
        _origin.session = previous


def current_session() -> str:
    """The session of the call this thread serves ("" if none)."""
    return str(getattr(_origin, "session", ""))


@dataclass(frozen=True)
class Change:
    inodes: frozenset[int] = frozenset()
    entries: frozenset[tuple[int, bytes]] = frozenset()  # (parent inode, name)
    origin: str = ""
    lost: bool = False  # the subscriber fell behind: changes were dropped before this one


@dataclass
class Subscription:
    session: str
    changes: queue.Queue[Change] = field(default_factory=lambda: queue.Queue(QUEUE_LIMIT))
    lost: bool = False


class ChangeFeed:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: list[Subscription] = []

    def subscribe(self, session: str) -> Subscription:
        sub = Subscription(session)
        with self._lock:
            self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subscribers:
                self._subscribers.remove(sub)

    def publish(self, change: Change) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for sub in subscribers:
            if sub.session and sub.session == change.origin:
                continue
            try:
                sub.changes.put_nowait(change)
            except queue.Full:
                sub.lost = True

    def publish_to(self, session: str, change: Change) -> None:
        """Publish ``change`` to the subscribers of ``session`` only."""
        with self._lock:
            subscribers = [sub for sub in self._subscribers if sub.session == session]
        for sub in subscribers:
            try:
                sub.changes.put_nowait(change)
            except queue.Full:
                sub.lost = True

    def lose(self) -> None:
        """Tell every subscriber that changes were lost (it forgets what it cached)."""
        with self._lock:
            subscribers = list(self._subscribers)
        for sub in subscribers:
            sub.lost = True
            with suppress(queue.Full):
                sub.changes.put_nowait(Change())


def listing_changed(feed: ChangeFeed, change: Invalidation) -> None:
    """A UFS listing of the tree of ``feed`` changed what mounts may have cached.

    Its commit reached every mount through ``WatchedKV`` (or the etcd watch)
    but the one whose call took the listing in the foreground: its own commits
    are not sent back to it. Tell that one here.
    """
    session = current_session()
    if session:
        feed.publish_to(session, Change(frozenset(change.inodes), frozenset(change.entries)))


def change_of(keys: set[bytes], origin: str) -> Change | None:
    """What a set of written tree keys means to a kernel cache (None: nothing)."""
    inodes = {codec.from_u64(k[1:9]) for k in keys if k[:1] == b"I" and len(k) == 9}
    entries = {(codec.from_u64(k[1:9]), k[9:]) for k in keys if k[:1] == b"D" and len(k) > 9}
    if not inodes and not entries:
        return None
    return Change(frozenset(inodes), frozenset(entries), origin)


class _WatchedTxn:
    def __init__(self, txn: KVTxn, written: set[bytes]) -> None:
        self._txn = txn
        self._written = written

    def get(self, key: bytes) -> bytes | None:
        return self._txn.get(key)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        return self._txn.get_many(keys)

    def put(self, key: bytes, value: bytes) -> None:
        self._txn.put(key, value)
        self._written.add(key)

    def delete(self, key: bytes) -> None:
        self._txn.delete(key)
        self._written.add(key)

    def scan(
        self, prefix: bytes, start_after: bytes | None = None, limit: int | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        return self._txn.scan(prefix, start_after, limit)


class WatchedKV:
    """``engine`` whose committed writes are published to ``feed``.

    ``shared``: other servers write the engine too; publish nothing here, but
    record the origin in each changing transaction for ``change_pump``.
    """

    def __init__(self, engine: KVEngine, feed: ChangeFeed, *, shared: bool = False) -> None:
        self._engine = engine
        self.feed = feed
        self._shared = shared

    @contextmanager
    def transaction(self, write: bool) -> Iterator[KVTxn]:
        if not write:
            with self._engine.transaction(False) as txn:
                yield txn
            return
        written: set[bytes] = set()
        session = current_session()
        with self._engine.transaction(True) as txn:
            yield _WatchedTxn(txn, written)
            if self._shared and change_of(written, session) is not None:
                txn.put(codec.ORIGIN_KEY, session.encode())
        change = change_of(written, session)  # reached only when the transaction committed
        if change is not None and not self._shared:
            self.feed.publish(change)

    def close(self) -> None:
        self._engine.close()
