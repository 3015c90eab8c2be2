"""The live jobs of a mount: their orders, positions, prefetch and block ranks.

A job is a (name, rank) pair: one process of a distributed training run. A new
announcement of a job replaces its previous one (the next epoch); a job ends
when the connection that announced it closes (the process exited or closed its
``Announcement``), or, for a detached announcement (``cloudfs hint``), after
``IDLE_SECONDS`` without a read of its files. Ending stops its prefetch at
once, gives its window back and drops its block ranks; its metric series stay,
marked finished, for a grace period (``finished.py``).

The board is the disk tier's ``Ranker`` while any job lives: a block's rank is
the place of its file in the announced order (the smallest over the jobs that
announced it), ``NOT_NEEDED`` once the job has read it this epoch, so the tier
evicts what is needed farthest away. A file being read keeps its ranks (and
its disk room stays taken) until a read reaches its end: dropping them when
the read starts let a prefetch evict the block the read was about to load.
Ranks are kept for the files within ``RANKED_FILES`` of each job's position
(bounded memory for huge orders), and extended as the job moves.
"""

from __future__ import annotations

import errno
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import trio

from cloudfs.cache.belady import NOT_NEEDED
from cloudfs.cache.disk import DiskBlockCache
from cloudfs.data.blocks import ObjectRef
from cloudfs.data.reader import ObjectReader
from cloudfs.epoch.finished import SERIES_GRACE, FinishedJobs
from cloudfs.epoch.order import EpochOrder
from cloudfs.epoch.telemetry import JobTelemetry
from cloudfs.errors import FsError
from cloudfs.meta.interface import Meta
from cloudfs.metrics import Metrics
from cloudfs.types import InodeId

log = logging.getLogger(__name__)

# A detached job with no read for this long has ended.
IDLE_SECONDS = 120.0
# Block ranks are kept for this many files past a job's position.
RANKED_FILES = 100_000
RANK_BATCH = 2_000
# Files read but never to their end (a header, a partial read) settle oldest first
# past this many, so they cannot keep their blocks ranked for the rest of the epoch.
READING_MAX = 256


@dataclass(frozen=True)
class JobKey:
    name: str
    rank: int

    def __str__(self) -> str:
        return f"{self.name}[{self.rank}]"


class Known(NamedTuple):
    """A file of an order whose object was resolved: what to GET, and its block keys."""

    ref: ObjectRef
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Window:
    """How far ahead of a job the mount fetches, and with how many GETs at once."""

    files: int = 512
    bytes: int = 256 << 20
    parallel: int = 32


@dataclass
class Job:
    key: JobKey
    epoch: int
    order: EpochOrder
    telemetry: JobTelemetry
    detached: bool = False
    prefetched: bytearray = field(default_factory=bytearray)  # 1: in the window, not read
    fetched: bytearray = field(default_factory=bytearray)  # 1: this epoch's prefetch fetched it
    ahead_files: int = 0  # fetched ahead, not read yet
    ahead_bytes: int = 0
    flight_bytes: int = 0  # of those, being fetched now
    ranked_until: int = 0  # block ranks are known for files before this place
    settled_until: int = 0  # places before it are read or passed over
    # Places being read -> whether their bytes are on disk (room for the prefetch once read).
    reading: dict[int, bool] = field(default_factory=dict)
    # Disk bytes the prefetch may fill without evicting a block this epoch still needs:
    # free capacity and blocks nobody needs; a read of a cached file adds its bytes.
    spare: float = math.inf
    # place -> its object and block keys, for the files within RANKED_FILES of the position
    known: dict[int, Known] = field(default_factory=dict)
    moved: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    last_read: float = 0.0
    ended: bool = False

    def wake(self) -> None:
        self.moved.set()
        self.moved = trio.Event()


class JobBoard:
    def __init__(
        self,
        meta: Meta,
        reader: ObjectReader,
        disk: DiskBlockCache | None,
        metrics: Metrics,
        window: Window,
        *,
        series_grace: float = SERIES_GRACE,
    ) -> None:
        self._meta = meta
        self._reader = reader
        self._disk = disk
        self._metrics = metrics
        self._window = window
        self._jobs: dict[JobKey, Job] = {}
        self._finished = FinishedJobs(series_grace)
        self._ranks: dict[str, int] = {}
        self._nursery: trio.Nursery | None = None

    # -- lifetime -----------------------------------------------------------------

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        nursery.start_soon(self._reap_idle)

    def stop(self) -> None:
        for job in list(self._jobs.values()):
            self.end(job)
        self._nursery = None

    @property
    def window(self) -> Window:
        return self._window

    # -- jobs ---------------------------------------------------------------------

    def announce(
        self,
        key: JobKey,
        epoch: int,
        order: EpochOrder,
        known: dict[int, Known],
        cached_bytes: int,
        *,
        detached: bool = False,
    ) -> Job:
        """Make ``order`` the job's order (replacing its previous one) and start fetching.

        ``known``: the objects and block keys of the order's first files (ranked at once). An
        epoch older than the job's current one is refused (ESTALE)."""
        old = self._jobs.get(key)
        if old is not None and epoch < old.epoch:  # two announcements raced: keep the newer
            raise FsError(
                f"job {key} has announced epoch {old.epoch} already, not {epoch}",
                errno=errno.ESTALE,
            )
        if old is not None:
            self._retire(old)
        self._finished.take(key)  # ended within the grace: its series run on
        telemetry = JobTelemetry(self._metrics, key.name, key.rank)
        job = Job(key, epoch, order, telemetry, detached)
        job.prefetched = bytearray(len(order))
        job.fetched = bytearray(len(order))
        job.last_read = trio.current_time()
        job.known = known
        job.ranked_until = max(known, default=-1) + 1
        if self._disk is not None:
            job.spare = self._disk.stats().capacity_bytes - cached_bytes
        self._jobs[key] = job
        self._rank(job, known.items())
        telemetry.announced(epoch, len(order), cached_bytes, order.total_bytes)
        if self._disk is not None and len(self._jobs) == 1:
            self._disk.set_ranker(self)
        if self._nursery is not None:
            self._nursery.start_soon(self._follow, job)
        log.info(
            "job %s announced epoch %d: %d files, %.0f%% cached",
            key, epoch, len(order), 100 * telemetry.predicted,
        )  # fmt: skip
        return job

    def end(self, job: Job) -> None:
        """``job`` ended: stop its prefetch, drop its ranks; its series stay a while."""
        if self._jobs.get(job.key) is not job:
            return
        self._retire(job)
        del self._jobs[job.key]
        self._finished.add(job.key, job.telemetry, trio.current_time())
        if self._disk is not None and not self._jobs:
            self._disk.set_ranker(None)
        log.info("job %s ended", job.key)

    def _retire(self, job: Job) -> None:
        job.ended = True
        job.scope.cancel()
        job.wake()
        unused = sum(
            job.order.size(i) for i in range(len(job.order))
            if job.prefetched[i] and not job.order.was_read(i)
        )  # fmt: skip
        job.telemetry.unused(unused)
        changed = [k for file in job.known.values() for k in file.keys]
        for k in changed:
            self._ranks.pop(k, None)
        job.known.clear()
        if self._disk is not None:
            self._disk.reranked(changed)

    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    # -- the read path (ReadWatch) --------------------------------------------------

    @property
    def active(self) -> bool:
        return bool(self._jobs)

    def read_started(self, inode: int) -> None:
        """Before the read fetches anything: the file leaves the window. Its ranks and
        disk room stay until the read reaches the file's end (``read_done``)."""
        for job in self._jobs.values():
            index = job.order.mark_read(inode)
            if index is None:
                continue
            job.telemetry.file_read()
            job.reading[index] = self._leave_window(job, index)
            self._pass_over(job)
            job.telemetry.position(job.order.position, job.ahead_files)
            job.wake()

    def read_done(self, inode: int, nbytes: int, held: bool, waited: float, *, eof: bool) -> None:
        now = trio.current_time()
        for job in self._jobs.values():
            places = job.order.places(inode)
            if not places:
                continue
            job.last_read = now
            ahead = any(job.fetched[i] for i in places)
            job.telemetry.read(nbytes, held, waited, fetched_ahead=ahead)
            if eof:
                index = next((i for i in places if i in job.reading), None)
                if index is not None:
                    self._settle(job, index, job.reading.pop(index))
                    job.wake()

    def _leave_window(self, job: Job, index: int) -> bool:
        """The file at ``index`` is read (or passed over): it no longer counts against
        the window. Returns whether its bytes are on disk, room once it is done with."""
        on_disk = bool(job.prefetched[index]) or self._held(job, index)
        if job.prefetched[index]:
            job.prefetched[index] = 0
            job.ahead_files -= 1
            job.ahead_bytes -= job.order.size(index)
        return on_disk

    def _settle(self, job: Job, index: int, on_disk: bool) -> None:
        """Nobody needs the file at ``index`` again this epoch: its disk bytes become
        room for the prefetch, and its blocks the disk tier's first victims."""
        if on_disk:
            job.spare += job.order.size(index)
        file = job.known.pop(index, None)
        keys = file.keys if file is not None else ()
        for k in keys:
            if self._ranks.get(k) == index:
                del self._ranks[k]
        if keys and self._disk is not None:
            self._disk.reranked(keys)

    def _pass_over(self, job: Job) -> None:
        """Files the position moved past unread (the kernel's page cache served them, or
        the job skipped them) are done with too: they must not hold the window's budget."""
        order = job.order
        for index in range(job.settled_until, order.position):
            if not order.was_read(index):
                self._settle(job, index, self._leave_window(job, index))
        job.settled_until = max(job.settled_until, order.position)
        while len(job.reading) > READING_MAX:
            index = min(job.reading)
            self._settle(job, index, job.reading.pop(index))

    # -- Ranker -------------------------------------------------------------------

    def rank(self, key: str) -> int:
        return self._ranks.get(key, NOT_NEEDED)

    def _rank(self, job: Job, items: Iterable[tuple[int, Known]]) -> None:
        changed = []
        for index, file in items:
            for k in file.keys:
                if self._ranks.get(k, NOT_NEEDED) > index:
                    self._ranks[k] = index
                    changed.append(k)
        if changed and self._disk is not None:
            self._disk.reranked(changed)

    # -- background work ------------------------------------------------------------

    async def _follow(self, job: Job) -> None:
        """Fetch ahead of ``job`` and keep its ranks ahead of it, until it ends."""
        with job.scope:
            async with trio.open_nursery() as nursery:
                limiter = trio.CapacityLimiter(self._window.parallel)
                nursery.start_soon(self._rank_ahead, job)
                await self._prefetch(job, nursery, limiter)

    async def _prefetch(
        self, job: Job, nursery: trio.Nursery, limiter: trio.CapacityLimiter
    ) -> None:
        order, window = job.order, self._window
        nxt = 0
        while not job.ended:
            nxt = max(nxt, order.position)
            # The window counts files fetched ahead, not places: cached files cost it
            # nothing, so a run of them (cache_first puts one at the start of each of
            # its windows) does not hide the uncached files behind it until the reader
            # is upon them. Past the ranked places, whose holdings are unknown, places
            # count as before.
            horizon = max(order.furthest + window.files, job.ranked_until)
            while (
                nxt < len(order)
                and nxt <= horizon
                and job.ahead_files < window.files
                and (
                    self._memory_bytes(job) == 0
                    or self._memory_bytes(job) + order.size(nxt) <= window.bytes
                )
            ):
                if not order.was_read(nxt) and not self._held(job, nxt):
                    if job.spare < order.size(nxt):
                        break  # the next read of a cached file frees room
                    job.spare -= order.size(nxt)
                    job.prefetched[nxt] = 1
                    job.ahead_files += 1
                    job.ahead_bytes += order.size(nxt)
                    job.flight_bytes += order.size(nxt)
                    token = object()
                    await limiter.acquire_on_behalf_of(token)  # GETs in flight; paces the loop
                    nursery.start_soon(self._fetch, job, nxt, limiter, token)
                nxt += 1
            job.telemetry.position(order.position, job.ahead_files)
            await job.moved.wait()

    def _memory_bytes(self, job: Job) -> int:
        """What the job's prefetch holds in memory, bounded by the window's bytes: with a
        disk tier only the fetches in flight (a fetched file waits on disk, within
        ``spare``), else every file fetched ahead and not read yet."""
        return job.flight_bytes if self._disk is not None else job.ahead_bytes

    def _held(self, job: Job, index: int) -> bool:
        """Whether every block of the file at ``index`` is on disk (False: unknown keys)."""
        file = job.known.get(index)
        if file is None or not file.keys or self._disk is None:
            return False
        return all(map(self._disk.contains, file.keys))

    async def _fetch(
        self, job: Job, index: int, limiter: trio.CapacityLimiter, token: object
    ) -> None:
        try:
            file = job.known.get(index)  # resolved when announced or ranked: no tree lookup
            ref = file.ref if file is not None else await self._ref(InodeId(job.order.inode(index)))
            if ref is not None and job.prefetched[index]:
                fetched = await self._reader.prefetch_whole(ref)
                if fetched:
                    job.fetched[index] = 1
                job.telemetry.prefetched(fetched)
        except FsError as e:  # best effort: the read fetches it itself
            log.debug("prefetch of inode %d for %s failed: %s", job.order.inode(index), job.key, e)
        finally:
            job.flight_bytes -= job.order.size(index)
            limiter.release_on_behalf_of(token)
            job.wake()

    async def _rank_ahead(self, job: Job) -> None:
        """Keep block ranks for the files within ``RANKED_FILES`` of the position."""
        order = job.order
        while not job.ended:
            until = min(len(order), order.position + RANKED_FILES)
            if job.ranked_until >= until:
                await job.moved.wait()
                continue
            batch = range(job.ranked_until, min(until, job.ranked_until + RANK_BATCH))
            inodes = [(i, InodeId(order.inode(i))) for i in batch]
            found = await trio.to_thread.run_sync(self._known, inodes)
            job.ranked_until = batch.stop
            fresh = {i: k for i, k in found.items() if not order.was_read(i)}
            job.known.update(fresh)
            self._rank(job, fresh.items())

    def _known(self, inodes: list[tuple[int, InodeId]]) -> dict[int, Known]:
        """Objects and block keys by place (in a worker thread: tree lookups)."""
        out = {}
        for index, inode in inodes:
            try:
                ref = self.ref_of(inode)
            except FsError:
                continue
            if ref is not None:
                out[index] = Known(ref, tuple(self._reader.block_keys(ref)))
        return out

    async def _ref(self, inode: InodeId) -> ObjectRef | None:
        return await trio.to_thread.run_sync(self.ref_of, inode)

    def ref_of(self, inode: InodeId) -> ObjectRef | None:
        """The object of a regular file, None if it has none yet (blocking)."""
        attr = self._meta.getattr(inode)
        if not attr.etag:
            return None
        return ObjectRef(key=self._meta.object_key(inode), etag=attr.etag, size=attr.size)

    async def _reap_idle(self) -> None:
        while True:
            await trio.sleep(1.0)
            now = trio.current_time()
            for job in list(self._jobs.values()):
                if job.detached and now - job.last_read > IDLE_SECONDS:
                    self.end(job)
            self._finished.expire(now)
