"""A job's time stalled on data, read from the mounts it uses.

The mounts count, per announced job and rank, the seconds a rank waited for a
block it asked for (``cloudfs_job_stall_seconds_total``, ``cloudfs.epoch``);
the job's workers announce under its id (``CLOUDFS_JOB``). The series exist
while the job lives and for a grace period after (``--job-series-grace``),
so the scheduler samples them while it runs and keeps the largest total seen.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from cloudfs.control import client
from cloudfs.errors import FsError, StartupError

SERIES = "cloudfs_job_stall_seconds"


def stall_seconds(mountpoints: Iterable[str], job_id: str, timeout: float = 2.0) -> float | None:
    """The job's stall seconds summed over its ranks and ``mountpoints``; None if no
    mount answered."""
    total: float | None = None
    for mountpoint in mountpoints:
        try:
            answer = client.result(mountpoint, {"op": "metrics"}, timeout=timeout)
        except (StartupError, FsError, OSError):
            continue
        total = (total or 0.0) + stall_in(str(answer.get("text", "")), job_id)
    return total


def stall_in(text: str, job_id: str) -> float:
    """The job's stall seconds in one Prometheus exposition."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:  # by the sample's name: the family's varies by parser
            if sample.name == f"{SERIES}_total" and sample.labels.get("job") == job_id:
                total += sample.value
    return total
