"""Uploader: pushes sealed write-back journal entries to the UFS, in the background.

One entry per inode is owed at a time: a newer ``submit`` for the same inode
supersedes the older entry (its data is dropped unuploaded), so a file
rewritten within ``delay`` seconds is uploaded once. An entry is due
``delay`` seconds after it was sealed. At most ``concurrency`` uploads of large
files run at once, and as many of files under ``small_bytes``; when no file was
closed into the journal for ``quiet`` seconds, up to ``small_concurrency`` more
of the small ones (one request each: the origin's latency, not its bandwidth,
bounds their rate; while files are being closed, the CPU goes to the closes
first). Due entries start in the order they are due. Each upload:

1. asks the sink for the file's current key (``None``: the file was unlinked,
   so it is never uploaded);
2. puts the whole file (``ObjectStore.put_file``: multipart for large files,
   resumable after a crash from a progress file in the journal);
3. asks for the key again: a rename or unlink during the put moves or deletes
   what was just put;
4. tells the sink (which records the new ETag in the tree), then forgets the
   journal entry.

A failure (an ``FsError`` from the store after its own bounded retries) is
retried after an exponential back-off with jitter, without limit: nothing is
dropped. An entry older than ``deadline`` seconds is reported loudly on every
failed attempt and counted in ``cloudfs_writeback_overdue_files``.

A rename or unlink in the mount holds the uploads of the files it names
(``held``): it waits for their puts in flight to finish and starts none until it
is done, so a put never lands under a name its file no longer has while another
file (the next ``latest.tmp``) was put and committed there.

``drain()`` waits until nothing is owed. ``backlog()`` and the
``cloudfs_writeback_*`` metrics describe what is owed. Runs in the trio
thread; blocking work (store, journal) goes to worker threads.

Only the end of the mount cancels ``run()`` (after the bounded drain, or
``--no-drain``). A put in flight is then abandoned, not waited for: a store
that stopped answering would otherwise hold the exit for its own timeouts and
retries, far past ``--drain-timeout`` (and a pod's grace period). Its entry
stays in the journal and the next mount puts it again, as after a crash; if
the put still lands meanwhile, it lands the same bytes under the same key. (The
delete or rename that follows a put whose file was unlinked or renamed is
waited for: cut short, it would leave an object under a name no file has.)
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import logging
import math
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

import trio

from cloudfs.data.journal import JournalEntry, WriteJournal
from cloudfs.errors import FsError
from cloudfs.metrics import Metrics
from cloudfs.types import ObjectInfo
from cloudfs.ufs.interface import ObjectStore

log = logging.getLogger(__name__)


class UploadSink(Protocol):
    """Where the uploader learns a file's key and reports a finished upload (the VFS)."""

    async def key_of(self, inode: int) -> str | None:
        """The file's UFS key now; ``None`` if it has no name left."""
        ...

    async def uploaded(self, entry: JournalEntry, info: ObjectInfo) -> None:
        """``entry``'s bytes are in the UFS as ``info``."""
        ...


@dataclass(frozen=True, slots=True)
class UploadPolicy:
    concurrency: int = 4
    small_concurrency: int = 12  # more uploads of small files once closes pause
    small_bytes: int = 8 << 20
    quiet: float = 0.5  # seconds without a seal before small_concurrency applies
    delay: float = 0.0  # seconds after close before an upload starts
    deadline: float = 3600.0  # seconds after close before a stuck upload is reported
    retry_base: float = 1.0  # first back-off, doubled per failure
    retry_max: float = 60.0


@dataclass(frozen=True, slots=True)
class Backlog:
    files: int
    bytes: int
    oldest_age: float  # seconds since the oldest owed entry was sealed; 0 if none
    failures: int  # failed attempts of the owed entries
    uploading: int


@dataclass
class _Owed:
    entry: JournalEntry
    due: float  # trio clock
    attempts: int = 0
    uploading: bool = False
    superseded_by: JournalEntry | None = field(default=None)
    recovered: bool = False
    put: ObjectInfo | None = None  # what an attempt put whose commit then failed


class Uploader:
    def __init__(
        self,
        journal: WriteJournal,
        store: ObjectStore,
        sink: UploadSink,
        metrics: Metrics,
        policy: UploadPolicy,
        limiter: trio.CapacityLimiter,
    ) -> None:
        self._journal = journal
        self._store = store
        self._sink = sink
        self._metrics = metrics
        self._policy = policy
        self._limiter = limiter
        self._owed: dict[int, _Owed] = {}  # inode -> the newest entry owed
        self._wake = trio.Event()
        self._changed = trio.Event()
        self._running = {False: 0, True: 0}  # uploads running, of large / small files
        self._last_seal = -math.inf  # trio clock
        self._in_flight: Counter[int] = Counter()  # inode -> its upload tasks running
        self._held: Counter[int] = Counter()  # inode -> renames/unlinks holding its uploads
        # When owed entries are due: (due, seq, inode), stale items skipped when popped, so
        # that a close costs O(log n) however many files are owed (not a scan of them all).
        self._due: list[tuple[float, int, int]] = []
        self._parked: dict[int, _Owed] = {}  # due but held: scheduled again when released
        # Seals wait on the journal's group commit, each in its own thread: not behind
        # the uploads' threads.
        self._seal_limiter = trio.CapacityLimiter(64)
        metrics.writeback_files.set_function(lambda: len(self._owed))
        metrics.writeback_bytes.set_function(lambda: sum(o.entry.size for o in self._owed.values()))
        metrics.writeback_oldest_age.set_function(lambda: self.backlog().oldest_age)
        metrics.writeback_overdue_files.set_function(self._overdue)

    # -- what is owed ---------------------------------------------------------

    async def seal(
        self, inode: int, key: str, size: int, mtime_ns: int, path: str, *, fd: int = -1
    ) -> JournalEntry:
        """Journal the complete file at ``path`` (moved, durably) and owe it to the UFS.

        ``fd``: the file, open; the journal fsyncs and closes it (in the same thread
        hop). Not cancelled once called, so the descriptor is always closed.
        Concurrent seals share the journal's fsyncs (its group commit), so each
        runs in its own thread.
        """
        seal = functools.partial(self._journal.seal, fd=fd)
        self._last_seal = trio.current_time()
        with trio.CancelScope(shield=True):
            entry: JournalEntry = await trio.to_thread.run_sync(
                seal, inode, key, size, mtime_ns, path, limiter=self._seal_limiter
            )
        self.submit(entry)
        return entry

    def submit(self, entry: JournalEntry, *, recovered: bool = False) -> None:
        """Owe ``entry`` to the UFS (superseding an older entry of its inode).

        ``recovered``: the entry comes from the journal of an earlier run. If
        the tree does not know its inode then, the tree lost it (an unlink
        drops the entry at once, see ``unlinked``), so it is uploaded under the
        key it had at close rather than dropped.
        """
        old = self._owed.get(entry.inode)
        if old is not None and old.entry.seq > entry.seq:
            self._forget_soon(entry)  # recovery order: an older entry arrived late
            return
        due = trio.current_time() + max(0.0, entry.sealed_at + self._policy.delay - time.time())
        self._owed[entry.inode] = _Owed(entry, due, recovered=recovered)
        self._schedule(self._owed[entry.inode])
        if old is not None:
            if old.uploading:
                old.superseded_by = entry  # its task forgets it when the put returns
            else:
                self._forget_soon(old.entry)
        self._poke()

    def unlinked(self, inode: int) -> None:
        """The file lost its last name: its bytes are owed to nobody any more."""
        owed = self._owed.pop(inode, None)
        if owed is None:
            return
        if owed.uploading:
            owed.superseded_by = owed.entry  # its task sees no key and cleans up
        else:
            self._forget_soon(owed.entry)
            if owed.put is not None:  # nobody may find what it put
                with contextlib.suppress(RuntimeError):  # no trio run: a leftover object
                    trio.lowlevel.spawn_system_task(self._drop_put, owed)
        self._poke()

    def pending(self, inode: int) -> JournalEntry | None:
        """The newest bytes of ``inode`` still owed to the UFS, if any."""
        owed = self._owed.get(inode)
        return owed.entry if owed is not None else None

    def backlog(self) -> Backlog:
        owed = list(self._owed.values())
        now = time.time()
        return Backlog(
            files=len(owed),
            bytes=sum(o.entry.size for o in owed),
            oldest_age=max((now - o.entry.sealed_at for o in owed), default=0.0),
            failures=sum(o.attempts for o in owed),
            uploading=sum(1 for o in owed if o.uploading),
        )

    async def drain(self) -> None:
        """Wait until nothing is owed (bound it with ``trio.move_on_after``)."""
        self._due_now(failed_only=False)  # no upload delay or back-off when draining
        while self._owed:
            await self._changed.wait()

    def retry_now(self) -> None:
        """What failed is due again at once (its back-off may have grown to a minute):
        what it waited for is back, as after a replay of the tree's journaled changes."""
        self._due_now(failed_only=True)

    def _due_now(self, *, failed_only: bool) -> None:
        now = trio.current_time()
        for owed in self._owed.values():
            if owed.due > now and (owed.attempts or not failed_only):
                owed.due = now
                self._schedule(owed)  # an upload running now is skipped when popped
        self._poke()

    @asynccontextmanager
    async def held(self, inodes: Iterable[int]) -> AsyncIterator[None]:
        """Within: no upload of ``inodes`` runs (those in flight finished first).

        A rename or unlink changes these files' keys; a put that read the old key
        before and landed after would overwrite whatever file holds that name then.
        """
        held = set(inodes)
        self._held.update(held)
        try:
            while any(self._in_flight[inode] for inode in held):
                await self._changed.wait()
            yield
        finally:
            self._held.subtract(held)
            self._held += Counter()  # drop the zeros
            for inode in held:
                parked = self._parked.pop(inode, None)
                if parked is not None:
                    self._schedule(parked)
            self._poke()

    # -- the work -------------------------------------------------------------

    async def run(self) -> None:
        """Upload what is due until cancelled (a nursery task of the mount)."""
        async with trio.open_nursery() as nursery:
            while True:
                while self._due and self._due[0][0] <= trio.current_time():
                    owed = self._next_due()
                    if owed is None:
                        continue
                    small = owed.entry.size < self._policy.small_bytes
                    await self._take_slot(small)
                    if not self._startable(owed):  # changed while waiting for a slot
                        self._running[small] -= 1
                        if self._owed.get(owed.entry.inode) is owed and not owed.uploading:
                            self._schedule(owed)
                        continue
                    owed.uploading = True
                    self._in_flight[owed.entry.inode] += 1
                    nursery.start_soon(self._upload, owed)
                self._wake = trio.Event()
                with trio.move_on_at(self._due[0][0] if self._due else math.inf):
                    await self._wake.wait()

    async def _take_slot(self, small: bool) -> None:
        while True:
            limit = max(1, self._policy.concurrency)
            if small and trio.current_time() - self._last_seal >= self._policy.quiet:
                limit += self._policy.small_concurrency
            if self._running[small] < limit:
                self._running[small] += 1
                return
            with trio.move_on_after(self._policy.quiet):  # or until closes pause
                await self._changed.wait()

    def _schedule(self, owed: _Owed) -> None:
        heapq.heappush(self._due, (owed.due, owed.entry.seq, owed.entry.inode))

    def _next_due(self) -> _Owed | None:
        """Pop the earliest due item: its entry if it may start now (a held one is parked)."""
        due, seq, inode = heapq.heappop(self._due)
        owed = self._owed.get(inode)
        if owed is None or owed.entry.seq != seq or owed.due != due or owed.uploading:
            return None  # stale: superseded, unlinked, rescheduled or started
        if self._held[inode]:
            self._parked[inode] = owed
            return None
        return owed

    def _startable(self, owed: _Owed) -> bool:
        inode = owed.entry.inode
        return self._owed.get(inode) is owed and not owed.uploading and not self._held[inode]

    async def _upload(self, owed: _Owed) -> None:
        entry = owed.entry
        try:
            done = await self._attempt(owed)
        except FsError as exc:
            done = False
            self._failed(owed, exc)
        except Exception:
            done = False
            log.exception("upload of %s (inode %d) failed unexpectedly", entry.key, entry.inode)
            self._failed(owed, None)
        finally:
            owed.uploading = False
            self._in_flight[entry.inode] -= 1
            if not self._in_flight[entry.inode]:
                del self._in_flight[entry.inode]
            self._running[entry.size < self._policy.small_bytes] -= 1
        if done or owed.superseded_by is not None:
            if self._owed.get(entry.inode) is owed:
                del self._owed[entry.inode]
            await self._drop_put(owed)  # put, then its file went away or newer bytes came
            await self._forget(entry)
        elif self._owed.get(entry.inode) is owed:
            self._schedule(owed)  # after its back-off
        self._poke()

    async def _attempt(self, owed: _Owed) -> bool:
        entry, recovered = owed.entry, owed.recovered
        key = await self._sink.key_of(entry.inode)
        if owed.put is not None and owed.put.key != key:
            await self._drop_put(owed)  # renamed or unlinked since an attempt put it
        lost = key is None and recovered  # no entry to commit to: the object is all there is
        if lost:
            log.warning(
                "the tree does not know inode %d from the journal (lost in a crash?):"
                " uploading it as %r, its name when it was closed", entry.inode, entry.key,
            )  # fmt: skip
            key = entry.key
        elif key is None:
            log.info("inode %d was unlinked before its upload: not uploaded", entry.inode)
            return True
        info: ObjectInfo = await trio.to_thread.run_sync(
            self._store.put_file,
            key,
            entry.data_path,
            self._journal.upload_state(entry),
            limiter=self._limiter,
            abandon_on_cancel=True,  # the end of the mount (see the module's docstring)
        )
        owed.put = info  # until committed: removed if its file goes away first
        if lost:  # kept, uncommitted: a listing of its directory shows it
            owed.put = None
            self._metrics.writeback_uploads.labels("ok").inc()
            self._metrics.writeback_uploaded_bytes.inc(entry.size)
            return True
        now_key = await self._sink.key_of(entry.inode)
        if now_key != key:  # renamed or unlinked while the put ran
            if now_key is None:
                await trio.to_thread.run_sync(self._store.delete, key, limiter=self._limiter)
                owed.put = None
                return True
            info = await trio.to_thread.run_sync(  # only the bytes put (see ObjectStore.rename)
                self._store.rename, key, now_key, info.etag, limiter=self._limiter
            )
            owed.put = info
        if self._superseded(entry):
            return True  # newer bytes are owed: they will be committed instead
        await self._sink.uploaded(entry, info)
        owed.put = None
        self._metrics.writeback_uploads.labels("ok").inc()
        self._metrics.writeback_uploaded_bytes.inc(entry.size)
        return True

    async def _drop_put(self, owed: _Owed) -> None:
        """Delete what an earlier attempt put and did not commit, if it is still there
        (another file may have been put under that name since)."""
        put, owed.put = owed.put, None
        if put is None or not put.key:
            return
        try:
            now = await trio.to_thread.run_sync(self._store.head, put.key, limiter=self._limiter)
            if now.etag == put.etag:
                await trio.to_thread.run_sync(self._store.delete, put.key, limiter=self._limiter)
        except FsError as exc:
            log.info("left %s, put by an upload whose file went away: %s", put.key, exc)

    def _superseded(self, entry: JournalEntry) -> bool:
        owed = self._owed.get(entry.inode)
        return owed is not None and owed.entry.seq != entry.seq

    def _failed(self, owed: _Owed, exc: FsError | None) -> None:
        owed.attempts += 1
        self._metrics.writeback_uploads.labels("error").inc()
        self._metrics.writeback_retries.inc()
        backoff = min(self._policy.retry_max, self._policy.retry_base * 2 ** (owed.attempts - 1))
        backoff *= random.uniform(0.5, 1.5)
        owed.due = trio.current_time() + backoff
        entry = owed.entry
        age = time.time() - entry.sealed_at
        if age > self._policy.deadline:
            log.error(
                "write-back OVERDUE: %s (inode %d, %d bytes) closed %.0f s ago is still not"
                " uploaded after %d attempts (%s); retrying in %.0f s",
                entry.key, entry.inode, entry.size, age, owed.attempts, exc, backoff,
            )  # fmt: skip
        else:
            log.warning(
                "upload of %s (inode %d) failed (attempt %d: %s); retrying in %.1f s",
                entry.key, entry.inode, owed.attempts, exc, backoff,
            )  # fmt: skip

    def _overdue(self) -> int:
        now = time.time()
        deadline = self._policy.deadline
        return sum(1 for o in self._owed.values() if now - o.entry.sealed_at > deadline)

    def _forget_soon(self, entry: JournalEntry) -> None:
        try:
            trio.lowlevel.spawn_system_task(self._forget, entry)
        except RuntimeError:  # no trio run: forget it now
            self._journal.remove(entry)

    async def _forget(self, entry: JournalEntry) -> None:
        try:
            await trio.to_thread.run_sync(self._journal.remove, entry, limiter=self._limiter)
        except FsError as exc:  # left for the next recovery to retry
            log.warning("could not remove journal entry %d: %s", entry.seq, exc)

    def _poke(self) -> None:
        self._wake.set()
        self._changed.set()
        self._changed = trio.Event()
