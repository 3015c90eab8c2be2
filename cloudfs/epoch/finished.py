"""Jobs that ended, whose metric series stay for a grace period.

A job's ``cloudfs_job_*`` series carried its figures while it ran; dropped the
moment it ends, a Prometheus scraping every 15-30 s never saw a short job's
final stall and hit totals, and ``cloudfs stats`` after the job said nothing
about it. So an ended job's series stay, marked finished
(``cloudfs_job_finished`` 1) with their final values, for ``grace`` seconds (a
few scrape intervals; ``--job-series-grace``), and go after it. A job
announced again before then takes its series back (``take``): its counters
run on, as they do from one epoch's announcement to the next.

Times are the caller's clock (``trio.current_time()`` for the board), passed
in, so the bookkeeping runs under a fake clock in tests.
"""

from __future__ import annotations

from collections.abc import Hashable

from cloudfs.epoch.telemetry import JobTelemetry

# Seconds an ended job's series stay: a few scrape intervals of a 15-30 s Prometheus.
SERIES_GRACE = 120.0


class FinishedJobs:
    def __init__(self, grace: float = SERIES_GRACE) -> None:
        self.grace = grace
        # job -> (when its series go, its figures); in the order the jobs ended
        self._ended: dict[Hashable, tuple[float, JobTelemetry]] = {}

    def add(self, key: Hashable, telemetry: JobTelemetry, now: float) -> None:
        """The job ``key`` ended at ``now``: mark its series finished, drop them after
        the grace (at once with no grace)."""
        self._ended.pop(key, None)
        if self.grace <= 0:
            telemetry.remove()
            return
        telemetry.finish()
        self._ended[key] = (now + self.grace, telemetry)

    def take(self, key: Hashable) -> bool:
        """The job ``key`` is announced again: its series are its own again, not to be
        dropped. Returns whether it had ended within the grace."""
        return self._ended.pop(key, None) is not None

    def expire(self, now: float) -> list[Hashable]:
        """Drop the series of the jobs whose grace is over at ``now``; those jobs."""
        gone = [key for key, (until, _) in self._ended.items() if until <= now]
        for key in gone:
            _, telemetry = self._ended.pop(key)
            telemetry.remove()
        return gone

    def __contains__(self, key: Hashable) -> bool:
        return key in self._ended

    def __len__(self) -> int:
        return len(self._ended)
