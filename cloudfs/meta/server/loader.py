"""Keeping directories fresh: list stale ones from the UFS, once per directory at a time.

A directory is listed when it was never listed or its listing is older than
the TTL. A per-directory lock makes a second thread wait for the first one's
listing and then reuse it (it re-checks freshness after the wait).

The listing runs without the namespace lock (a 10,000-entry S3 listing takes
seconds) and is merged under it. A namespace change in that directory while
the listing was in flight would be undone by merging the stale listing (a
directory just made removed, an unlinked object resurrected, a file uploaded
meanwhile dropped as gone from the UFS), in this server or in another one
sharing the tree. Every such change rewrites the directory's change token
(``tree.mark_changed``), so the token is read before the listing and again
under the namespace lock: if it changed, or the directory moved (its key
changed, ``bump``), the listing is taken again. The last try holds the
namespace lock throughout, so it always finishes. Lock order: directory lock,
then namespace lock; never the reverse (mutations make directories fresh
before taking the namespace lock).
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager, nullcontext

from cloudfs.errors import RemoteIOError
from cloudfs.meta.server import tree
from cloudfs.meta.server.codec import InodeRecord
from cloudfs.meta.server.context import TreeContext
from cloudfs.meta.server.kv_retry import write_txn
from cloudfs.meta.server.locks import KeyedLocks
from cloudfs.meta.server.ns_lock import NamespaceLock
from cloudfs.meta.server.ufs_sync import list_directory, merge_listing

OPTIMISTIC_TRIES = 2
RETRY_AFTER_FAILURE_NS = 5_000_000_000

log = logging.getLogger(__name__)


class DirectoryLoader:
    def __init__(self, ctx: TreeContext, ns_lock: NamespaceLock) -> None:
        self._ctx = ctx
        self._ns_lock = ns_lock
        self._dir_locks = KeyedLocks()
        self._guard = threading.Lock()
        self._moved: dict[int, int] = {}  # directory being listed -> moves seen
        self._retry_at: dict[int, int] = {}  # directory whose listing failed -> next try

    def bump(self, *inos: int | None) -> None:
        """Record that these directories moved: a listing of them is taken again."""
        with self._guard:
            for ino in inos:
                if ino is not None and ino in self._moved:
                    self._moved[ino] += 1

    def stale(self, ino: int) -> bool:
        """Whether directory ``ino`` is due for a listing (never listed, or older than the TTL)."""
        with self._ctx.kv.transaction(write=False) as txn:
            rec = tree.load_dir(txn, ino)
        return not self.is_fresh(rec)

    def is_fresh(self, rec: InodeRecord) -> bool:
        """Whether the directory of record ``rec`` was listed within the TTL."""
        return not self._ctx.settings.is_stale(rec.loaded_at_ns, self._ctx.clock())

    def _snapshot(self, ino: int) -> tuple[str, bytes | None]:
        """Directory ``ino``'s UFS key and change token."""
        with self._ctx.kv.transaction(write=False) as txn:
            return tree.key_of(txn, ino), tree.change_token(txn, ino)

    def ensure_fresh(self, ino: int) -> None:
        """List directory ``ino`` from the UFS if stale (``NotADirectory``, ``NotFound``).

        If the UFS cannot be listed (``RemoteIOError``) and the directory was
        listed before, the tree's last view is served, with a warning, and the
        listing is not tried again for ``RETRY_AFTER_FAILURE_NS``: an outage of
        the object store must not turn every cached file into EIO.
        """
        if not self.stale(ino):
            return
        with self._guard:
            if self._retry_at.get(ino, 0) > self._ctx.clock():
                return
        with self._dir_locks.hold(ino):
            try:
                for attempt in range(OPTIMISTIC_TRIES + 1):
                    if not self.stale(ino):
                        return
                    final = attempt == OPTIMISTIC_TRIES
                    if self._try_load(ino, final):
                        with self._guard:
                            self._retry_at.pop(ino, None)
                        return
            except RemoteIOError as e:
                if not self._listed_before(ino):
                    raise
                log.warning("listing directory %d failed, serving the last listing: %s", ino, e)
                with self._guard:
                    self._retry_at[ino] = self._ctx.clock() + RETRY_AFTER_FAILURE_NS

    def _listed_before(self, ino: int) -> bool:
        with self._ctx.kv.transaction(write=False) as txn:
            return tree.load_dir(txn, ino).loaded_at_ns != 0

    def _try_load(self, ino: int, final: bool) -> bool:
        outer: AbstractContextManager[object] = self._ns_lock if final else nullcontext()
        with outer:
            with self._guard:
                self._moved[ino] = 0
            try:
                before = self._snapshot(ino)
                listing = list_directory(self._ctx.store, before[0])
                with self._ns_lock:
                    with self._guard:
                        moved = self._moved[ino] != 0
                    if not final and (moved or self._snapshot(ino) != before):
                        return False  # changed while listed: the listing may be stale
                    now, settings = self._ctx.clock(), self._ctx.settings
                    write_txn(
                        self._ctx.kv,
                        lambda txn: merge_listing(txn, ino, listing, now, settings),
                    )
                    return True
            finally:
                with self._guard:
                    del self._moved[ino]
