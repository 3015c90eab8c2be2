"""One job's figures: Prometheus series labelled (job, rank), and a copy for ``cloudfs stats``.

The series exist while the job lives and, marked by ``cloudfs_job_finished`` 1
(``finish``), for a grace period after it ends (``finished.py``), so a scrape
after a short job still reads its final figures; then ``remove`` drops them.
A job announced again picks its series up where they were. Bytes read split three ways: hits (a tier
held them from before this epoch's prefetch: what the cache kept, the figure
the next-epoch cached fraction predicts), prefetch hits (held because the
prefetch fetched them ahead of the read), and misses. A stall is the time a
read waited for a block that no tier held yet (the UFS, or a fetch in flight).
"""

from __future__ import annotations

import contextlib

from cloudfs.metrics import Metrics


class JobTelemetry:
    def __init__(self, metrics: Metrics, job: str, rank: int) -> None:
        self._metrics = metrics
        self._labels = (job, str(rank))
        m, labels = metrics, self._labels
        self._files = m.job_read_files.labels(*labels)
        self._bytes = m.job_read_bytes.labels(*labels)
        self._hit_bytes = m.job_hit_bytes.labels(*labels)
        self._prefetch_hit_bytes = m.job_prefetch_hit_bytes.labels(*labels)
        self._stall = m.job_stall_seconds.labels(*labels)
        self._prefetched = m.job_prefetched_bytes.labels(*labels)
        self._unused = m.job_prefetch_unused_bytes.labels(*labels)
        self._lead = m.job_prefetch_lead.labels(*labels)
        self._predicted = m.job_next_epoch_cached.labels(*labels)
        self._epoch = m.job_epoch.labels(*labels)
        self._position = m.job_position.labels(*labels)
        self._order_files = m.job_order_files.labels(*labels)
        self._finished = m.job_finished.labels(*labels)
        self.predicted = 0.0
        self.files = self.bytes = self.hit_bytes = self.prefetch_hit_bytes = 0
        self.stall_seconds = 0.0

    def announced(self, epoch: int, files: int, cached_bytes: int, total_bytes: int) -> None:
        self.predicted = cached_bytes / total_bytes if total_bytes else 1.0
        self._predicted.set(self.predicted)
        self._epoch.set(epoch)
        self._order_files.set(files)
        self._position.set(0)
        self._lead.set(0)
        self._finished.set(0)
        self.files = self.bytes = self.hit_bytes = self.prefetch_hit_bytes = 0
        self.stall_seconds = 0.0

    def file_read(self) -> None:
        self.files += 1
        self._files.inc()

    def read(self, nbytes: int, held: bool, waited: float, *, fetched_ahead: bool) -> None:
        self.bytes += nbytes
        self._bytes.inc(nbytes)
        if held and fetched_ahead:
            self.prefetch_hit_bytes += nbytes
            self._prefetch_hit_bytes.inc(nbytes)
        elif held:
            self.hit_bytes += nbytes
            self._hit_bytes.inc(nbytes)
        elif waited > 0:
            self.stall_seconds += waited
            self._stall.inc(waited)

    def position(self, position: int, lead: int) -> None:
        self._position.set(position)
        self._lead.set(lead)

    def prefetched(self, nbytes: int) -> None:
        self._prefetched.inc(nbytes)

    def unused(self, nbytes: int) -> None:
        self._unused.inc(nbytes)

    def finish(self) -> None:
        """The job ended: its series keep their final values, marked finished."""
        self._finished.set(1)

    def remove(self) -> None:
        for series in self._metrics.job_series():
            with contextlib.suppress(KeyError):
                series.remove(*self._labels)
