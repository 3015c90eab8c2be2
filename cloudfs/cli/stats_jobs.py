"""The jobs view of ``cloudfs stats``: one row per announced job and rank.

Read from the ``cloudfs_job_*`` series (``cloudfs.epoch.telemetry``), which
exist while a job lives and, marked ``cloudfs_job_finished``, for a grace
period after it ended (``--job-series-grace``): running jobs and recently
finished ones are shown apart, the latter with their final figures. Counters
run since the job's first announcement; the gauges describe its current epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Samples = Mapping[tuple[str, frozenset[tuple[str, str]]], float]

_FIELDS = {
    "cloudfs_job_epoch": "epoch",
    "cloudfs_job_order_files": "order_files",
    "cloudfs_job_position_files": "position",
    "cloudfs_job_read_files_total": "read_files",
    "cloudfs_job_read_bytes_total": "read_bytes",
    "cloudfs_job_hit_bytes_total": "hit_bytes",
    "cloudfs_job_prefetch_hit_bytes_total": "prefetch_hit_bytes",
    "cloudfs_job_stall_seconds_total": "stall_seconds",
    "cloudfs_job_prefetched_bytes_total": "prefetched_bytes",
    "cloudfs_job_prefetch_unused_bytes_total": "prefetch_unused_bytes",
    "cloudfs_job_prefetch_lead_files": "prefetch_lead",
    "cloudfs_job_next_epoch_cached_ratio": "next_epoch_cached",
    "cloudfs_job_finished": "finished",
}


@dataclass(frozen=True, slots=True)
class JobRow:
    job: str
    rank: int
    epoch: float = 0.0
    order_files: float = 0.0
    position: float = 0.0
    read_files: float = 0.0
    read_bytes: float = 0.0
    hit_bytes: float = 0.0
    prefetch_hit_bytes: float = 0.0
    stall_seconds: float = 0.0
    prefetched_bytes: float = 0.0
    prefetch_unused_bytes: float = 0.0
    prefetch_lead: float = 0.0
    next_epoch_cached: float = 0.0
    finished: float = 0.0  # 1: the job ended, these are its final figures

    @property
    def hit_ratio(self) -> float | None:
        """Bytes the cache held from before this epoch's prefetch, over bytes read."""
        return self.hit_bytes / self.read_bytes if self.read_bytes else None

    @property
    def prefetch_hit_ratio(self) -> float | None:
        """Bytes held because the prefetch fetched them ahead, over bytes read."""
        return self.prefetch_hit_bytes / self.read_bytes if self.read_bytes else None

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "rank": self.rank,
            "epoch": int(self.epoch),
            "order_files": int(self.order_files),
            "position": int(self.position),
            "read_files": int(self.read_files),
            "read_bytes": int(self.read_bytes),
            "hit_ratio": self.hit_ratio,
            "prefetch_hit_ratio": self.prefetch_hit_ratio,
            "stall_seconds": self.stall_seconds,
            "prefetched_bytes": int(self.prefetched_bytes),
            "prefetch_unused_bytes": int(self.prefetch_unused_bytes),
            "prefetch_lead_files": int(self.prefetch_lead),
            "next_epoch_cached_ratio": self.next_epoch_cached,
            "finished": bool(self.finished),
        }


def parse_jobs(samples: Samples) -> list[JobRow]:
    values: dict[tuple[str, int], dict[str, float]] = {}
    for (name, labels), value in samples.items():
        field = _FIELDS.get(name)
        if field is None:
            continue
        label = dict(labels)
        try:
            key = (label["job"], int(label["rank"]))
        except (KeyError, ValueError):
            continue
        values.setdefault(key, {})[field] = value
    return [JobRow(job, rank, **fields) for (job, rank), fields in sorted(values.items())]


def running(jobs: Iterable[JobRow]) -> list[JobRow]:
    return [j for j in jobs if not j.finished]


def finished(jobs: Iterable[JobRow]) -> list[JobRow]:
    return [j for j in jobs if j.finished]


def rows(
    jobs: Iterable[JobRow], percent: Any, seconds: Any, size: Any, title: str = "Job"
) -> list[list[str]]:
    """The jobs table's cells (formatters passed in by the view); ``title`` heads it."""
    out = [[title, "epoch", "at", "hit", "ahead", "stalled", "lead", "next cached", "read"]]
    for j in jobs:
        out.append(
            [
                f"  {j.job}[{j.rank}]",
                f"{j.epoch:.0f}",
                f"{j.position:.0f}/{j.order_files:.0f}",
                percent(j.hit_ratio),
                percent(j.prefetch_hit_ratio),
                seconds(j.stall_seconds),
                f"{j.prefetch_lead:.0f}",
                percent(j.next_epoch_cached),
                size(j.read_bytes),
            ]
        )
    return out
