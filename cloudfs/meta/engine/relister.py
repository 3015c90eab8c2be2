"""Listing directories again behind the readers' backs (stale-while-revalidate).

A directory that was listed before and whose listing is older than the TTL is
served from that listing at once while this lists it again in the background,
so a training epoch longer than the TTL never waits on a LIST. Rules:

* at most one re-list per directory at a time (queued or running), at most
  ``workers`` at once, at most ``MAX_QUEUED`` waiting (a request beyond that
  is dropped: the directory's next reader asks again);
* a failed re-list is logged, never raised to a reader; a directory whose
  re-lists have kept failing for ``FAILING_TTLS`` TTLs is no longer served
  stale (``failing``): its next reader lists it, waiting, like a first listing
  (the loader then falls back to the old listing with a warning if the UFS is
  still down, see ``loader``);
* refresh ahead: a directory read within the last ``ACTIVE_TTLS`` TTLs is
  listed again as soon as its listing expires, even if nobody reads it just
  then, so a change in the UFS still shows about one TTL (plus a LIST) after
  it was made, as ``--meta-ttl`` promises, rather than one read later;
* ``close`` stops the workers: it waits up to ``CLOSE_WAIT_S`` for LISTs in
  flight and drops what they bring back (the threads are daemons, so a LIST
  hung in the UFS cannot hang the unmount either).

Thread-safe; the threads start on first use, so a tree nobody reads costs none.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from cloudfs.errors import NotADirectory, NotFound

MAX_QUEUED = 10_000
FAILING_TTLS = 4
ACTIVE_TTLS = 4
CLOSE_WAIT_S = 5.0
MAX_WAIT_S = 1.0  # workers look at the clock at least this often (a clock may jump)

log = logging.getLogger(__name__)

# Lists directory ``ino`` again if it is still stale; returns when it was listed (ns).
Relist = Callable[[int], int]


class BackgroundRelister:
    """Runs ``relist(ino)`` for stale directories in up to ``workers`` threads.

    Args:
        relist: lists a directory again if still stale (raises ``FsError``);
            returns the directory's ``loaded_at_ns`` after.
        clock: nanoseconds since the epoch, the tree's clock.
        ttl_ns: how long a listing stays fresh.
        workers: background re-lists at once.
        refresh_ahead: list recently read directories again as they expire.
    """

    def __init__(
        self,
        relist: Relist,
        clock: Callable[[], int],
        ttl_ns: float,
        *,
        workers: int = 4,
        refresh_ahead: bool = True,
    ) -> None:
        self._relist = relist
        self._clock = clock
        self._ttl_ns = ttl_ns
        self._workers = max(1, workers)
        self._refresh_ahead = refresh_ahead
        self._cond = threading.Condition()
        self._queue: deque[int] = deque()
        self._busy: set[int] = set()  # queued or running
        self._due: list[tuple[int, int]] = []  # (expiry ns, ino): refresh-ahead heap
        self._scheduled: set[int] = set()
        self._used: dict[int, int] = {}  # directory -> when a reader was last served
        self._failing: dict[int, int] = {}  # directory -> first failure of its re-lists
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.relisted = 0  # re-lists finished (listed or found fresh), for tests and stats
        self.failed = 0

    # -- what readers call -------------------------------------------------

    def served(self, ino: int, loaded_at_ns: int) -> bool:
        """A reader is served directory ``ino``'s listing taken at ``loaded_at_ns`` (not 0).

        Returns whether that listing may be served: always when fresh; when
        stale, unless its re-lists keep failing (a re-list is queued then).
        """
        now = self._clock()
        with self._cond:
            if self._closed:
                return now - loaded_at_ns <= self._ttl_ns
            if self._refresh_ahead:
                self._used[ino] = now
                self._schedule(ino, loaded_at_ns)
            if now - loaded_at_ns <= self._ttl_ns:
                return True
            first = self._failing.get(ino)
            if first is not None and now - first > FAILING_TTLS * self._ttl_ns:
                return False
            self._request(ino)
            return True

    def listed(self, ino: int, loaded_at_ns: int) -> None:
        """Directory ``ino`` was listed for a caller: its failures are over, and it is in use."""
        now = self._clock()
        with self._cond:
            self._failing.pop(ino, None)
            if self._refresh_ahead and not self._closed:
                self._used[ino] = now
                self._schedule(ino, loaded_at_ns)

    # -- state, under the condition's lock ------------------------------------

    def _schedule(self, ino: int, loaded_at_ns: int) -> None:
        if ino in self._scheduled or ino in self._busy:
            return
        self._scheduled.add(ino)
        heapq.heappush(self._due, (loaded_at_ns + int(self._ttl_ns) + 1, ino))
        self._start()
        self._cond.notify()

    def _request(self, ino: int) -> None:
        if ino in self._busy:
            return
        if len(self._queue) >= MAX_QUEUED:
            log.debug("background listing queue full: directory %d waits for its next reader", ino)
            return
        self._busy.add(ino)
        self._queue.append(ino)
        self._start()
        self._cond.notify()

    def _start(self) -> None:
        while len(self._threads) < self._workers:
            thread = threading.Thread(
                target=self._work, name=f"cloudfs-relist-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _promote_due(self, now: int) -> None:
        """Queue the re-lists of recently read directories whose listing expired."""
        while self._due and self._due[0][0] <= now:
            _, ino = heapq.heappop(self._due)
            self._scheduled.discard(ino)
            used = self._used.get(ino)
            if used is not None and now - used <= ACTIVE_TTLS * self._ttl_ns:
                self._request(ino)
            else:
                self._used.pop(ino, None)

    def _wait_s(self, now: int) -> float:
        if not self._due:
            return MAX_WAIT_S
        return min(MAX_WAIT_S, max(0.001, (self._due[0][0] - now) / 1e9))

    # -- the workers -------------------------------------------------------

    def _next(self) -> int | None:
        with self._cond:
            while not self._closed:
                now = self._clock()
                self._promote_due(now)
                if self._queue:
                    return self._queue.popleft()
                self._cond.wait(self._wait_s(now))
            return None

    def _work(self) -> None:
        while (ino := self._next()) is not None:
            self._run(ino)

    def _run(self, ino: int) -> None:
        loaded_at: int | None = None
        try:
            loaded_at = self._relist(ino)
        except (NotFound, NotADirectory):
            with self._cond:  # the directory went away meanwhile: nothing to refresh
                self._used.pop(ino, None)
                self._failing.pop(ino, None)
        except Exception as exc:  # a reader has the old listing: log, never raise
            with self._cond:
                self.failed += 1
                self._failing.setdefault(ino, self._clock())
                closed = self._closed
            if not closed:
                log.warning("listing directory %d again in the background failed: %s", ino, exc)
        else:
            with self._cond:
                self.relisted += 1
                self._failing.pop(ino, None)
        finally:
            with self._cond:
                self._busy.discard(ino)
                if loaded_at and self._refresh_ahead and ino in self._used:
                    self._schedule(ino, loaded_at)
                self._cond.notify_all()

    # -- tests and shutdown ------------------------------------------------

    def wake(self) -> None:
        """Look at the clock now (a test moved its fake clock)."""
        with self._cond:
            self._cond.notify_all()

    def idle(self, timeout: float) -> bool:
        """Wait until no re-list is queued or running; False if ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

    def running(self) -> int:
        """Worker threads still alive."""
        return sum(1 for t in self._threads if t.is_alive())

    def close(self) -> None:
        """Stop the workers, waiting up to ``CLOSE_WAIT_S`` for LISTs in flight."""
        with self._cond:
            self._closed = True
            self._busy.difference_update(self._queue)
            self._queue.clear()
            self._cond.notify_all()
            threads = list(self._threads)
        deadline = time.monotonic() + CLOSE_WAIT_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in threads):
            log.warning("a background listing is still in the UFS at close: its result is dropped")
