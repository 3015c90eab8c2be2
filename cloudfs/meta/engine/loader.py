"""Keeping directories fresh: list stale ones from the UFS, once per directory at a time.

A directory is listed when it was never listed or its listing is older than
the TTL. A per-directory lock makes a second thread wait for the first one's
listing and then reuse it (it re-checks freshness after the wait).

The listing runs without the namespace lock (a 10,000-entry S3 listing takes
seconds) and is merged under it (which keeps directory moves in the UFS out).
A namespace change in that directory while the listing was in flight would
be undone by merging the stale listing (a
directory just made removed, an unlinked object resurrected, a file uploaded
meanwhile dropped as gone from the UFS), in this server or in another one
sharing the tree. Every such change rewrites the directory's change token
(``tree.mark_changed``), so the token is read before the listing and again
in the merge's transaction: if it changed, or the directory moved (its key
changed, ``bump``), the listing is taken again. The last try holds the
namespace lock throughout (no directory moves in the UFS meanwhile) and
always finishes: namespace changes take no lock, so it notes every entry's
version before listing and the merge leaves alone every name whose entry
changed meanwhile (``merge_listing``'s ``trust``); the next listing decides
those. Lock order: directory lock,
then namespace lock; never the reverse (mutations make directories fresh
before taking the namespace lock).

Stale-while-revalidate (``revalidate``): reads (``ensure_listed``, and the
``servable`` check of a lookup) of a directory listed before are answered
from its listing even past the TTL, while ``BackgroundRelister`` lists it
again behind them; only a directory never listed, or one whose background
re-lists have kept failing for several TTLs, makes its reader wait.
Namespace changes still wait for a fresh listing (``ensure_fresh``): they
must not act on a stale view of the UFS. With a TTL of 0 every access waits.

Every merge that changed something a kernel may have cached is reported to
``on_change`` (an ``Invalidation``) after it commits.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from cloudfs.errors import RemoteIOError
from cloudfs.lib.locks import KeyedLocks
from cloudfs.meta.engine import tree
from cloudfs.meta.engine.codec import InodeRecord
from cloudfs.meta.engine.context import TreeContext
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.kv_retry import write_txn
from cloudfs.meta.engine.ns_lock import NamespaceLock
from cloudfs.meta.engine.relister import BackgroundRelister
from cloudfs.meta.engine.ufs_sync import (
    MergeChanges,
    entry_versions,
    list_directory,
    merge_listing,
)
from cloudfs.meta.interface import Invalidation

OPTIMISTIC_TRIES = 2
RETRY_AFTER_FAILURE_NS = 5_000_000_000

log = logging.getLogger(__name__)


def _ignore(_: Invalidation) -> None:
    pass


class DirectoryLoader:
    """Lists directories of the tree ``ctx`` from its UFS when they are due.

    Args:
        revalidate: serve stale listings to readers while re-listing them in
            the background, in up to ``background_listings`` threads.
        on_change: told what each merge changed (called after its commit, in
            the listing thread; it must not block).
    """

    def __init__(
        self,
        ctx: TreeContext,
        ns_lock: NamespaceLock,
        *,
        revalidate: bool = False,
        background_listings: int = 4,
        on_change: Callable[[Invalidation], None] = _ignore,
    ) -> None:
        self._ctx = ctx
        self._ns_lock = ns_lock
        self._on_change = on_change
        self._dir_locks = KeyedLocks()
        self._guard = threading.Lock()
        self._moved: dict[int, int] = {}  # directory being listed -> moves seen
        self._retry_at: dict[int, int] = {}  # directory whose listing failed -> next try
        self._relister: BackgroundRelister | None = None
        if revalidate and ctx.settings.ttl_ns > 0:
            self._relister = BackgroundRelister(
                self._relist, ctx.clock, ctx.settings.ttl_ns, workers=background_listings
            )

    @property
    def relister(self) -> BackgroundRelister | None:
        """The background re-lists (None without ``revalidate``)."""
        return self._relister

    def close(self) -> None:
        """Stop the background re-lists (before the KV engine closes)."""
        if self._relister is not None:
            self._relister.close()

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

    def servable(self, ino: int, rec: InodeRecord) -> bool:
        """Whether a reader may be answered from directory ``ino``'s listing ``rec`` now.

        Fresh: yes. Stale but listed before, with ``revalidate``: yes, and a
        background re-list is queued (unless its re-lists keep failing).
        """
        if self._relister is None or rec.loaded_at_ns == 0:
            return self.is_fresh(rec)
        return self._relister.served(ino, rec.loaded_at_ns)

    def ensure_listed(self, ino: int) -> None:
        """For a reader: ``ensure_fresh``, unless the old listing may be served meanwhile."""
        with self._ctx.kv.transaction(write=False) as txn:
            rec = tree.load_dir(txn, ino)
        if not self.servable(ino, rec):
            self.ensure_fresh(ino)

    def _snapshot(self, ino: int) -> tuple[str, bytes | None]:
        """Directory ``ino``'s UFS key and change token."""
        with self._ctx.kv.transaction(write=False) as txn:
            return _snapshot_in(txn, ino)

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
        try:
            loaded_at = self._load(ino)
        except RemoteIOError as e:
            if not self._listed_before(ino):
                raise
            log.warning("listing directory %d failed, serving the last listing: %s", ino, e)
            with self._guard:
                self._retry_at[ino] = self._ctx.clock() + RETRY_AFTER_FAILURE_NS
            return
        if self._relister is not None:
            self._relister.listed(ino, loaded_at)

    def _load(self, ino: int) -> int:
        """List directory ``ino`` if still stale once its lock is held (raises ``FsError``).

        Returns when it was listed last (ns)."""
        with self._dir_locks.hold(ino):
            for attempt in range(OPTIMISTIC_TRIES + 1):
                if not self.stale(ino):
                    break
                if self._try_load(ino, final=attempt == OPTIMISTIC_TRIES):
                    break
        with self._guard:
            self._retry_at.pop(ino, None)
        with self._ctx.kv.transaction(write=False) as txn:
            return tree.load_dir(txn, ino).loaded_at_ns

    def refresh(self, ino: int) -> Invalidation:
        """List directory ``ino`` from the UFS now, whatever its age (``cloudfs refresh``).

        Returns what the listing changed (also told to ``on_change``); raises
        ``NotADirectory``, ``NotFound``, or ``RemoteIOError`` if the UFS cannot
        be listed (the old listing stays).
        """
        found: list[Invalidation] = []
        with self._dir_locks.hold(ino):
            for attempt in range(OPTIMISTIC_TRIES + 1):
                if self._try_load(ino, final=attempt == OPTIMISTIC_TRIES, found=found):
                    break
        with self._guard:
            self._retry_at.pop(ino, None)
        if self._relister is not None:
            with self._ctx.kv.transaction(write=False) as txn:
                self._relister.listed(ino, tree.load_dir(txn, ino).loaded_at_ns)
        return found[-1] if found else Invalidation()

    def _relist(self, ino: int) -> int:
        """The background re-list of ``ino`` (``BackgroundRelister``); when it was listed."""
        return self._load(ino)

    def _listed_before(self, ino: int) -> bool:
        with self._ctx.kv.transaction(write=False) as txn:
            return tree.load_dir(txn, ino).loaded_at_ns != 0

    def _try_load(self, ino: int, final: bool, found: list[Invalidation] | None = None) -> bool:
        """One listing and merge; False if the directory changed meanwhile (try again).

        What the merge changed goes to ``on_change``, and to ``found`` if given."""
        outer: AbstractContextManager[object] = self._ns_lock if final else nullcontext()
        with outer:
            with self._guard:
                self._moved[ino] = 0
            try:
                before = self._snapshot(ino)
                trust = None
                if final:  # changes take no lock: the listing speaks only for names
                    with self._ctx.kv.transaction(write=False) as txn:  # left as they were
                        trust = entry_versions(txn, ino)
                listing = list_directory(self._ctx.store, before[0])
                with self._ns_lock:
                    if self._relister is not None and self._relister.closed:
                        return True  # closing: the engine may be gone, drop the listing
                    with self._guard:
                        moved = self._moved[ino] != 0
                    if not final and moved:
                        return False  # moved while listed: the listing may be of another key
                    now, settings = self._ctx.clock(), self._ctx.settings

                    def merge(txn: KVTxn) -> MergeChanges | None:
                        # checked in the merge's own transaction: changes take no lock
                        if not final and _snapshot_in(txn, ino) != before:
                            return None  # changed while listed: the listing may be stale
                        return merge_listing(txn, ino, listing, now, settings, trust)

                    seen = write_txn(self._ctx.kv, merge)
                    if seen is None:
                        return False
                    change = seen.to_invalidation()
                    if change is not None:
                        self._on_change(change)
                        if found is not None:
                            found.append(change)
                    return True
            finally:
                with self._guard:
                    del self._moved[ino]


def _snapshot_in(txn: KVTxn, ino: int) -> tuple[str, bytes | None]:
    return tree.key_of(txn, ino), tree.change_token(txn, ino)
