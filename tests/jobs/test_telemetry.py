"""A job's stall seconds from a mount's Prometheus text."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from cloudfs.jobs.telemetry import stall_in
from cloudfs.metrics import Metrics


def test_stall_is_summed_over_the_job_s_ranks_only() -> None:
    metrics = Metrics(CollectorRegistry())
    metrics.job_stall_seconds.labels("ddp-3", "0").inc(1.5)
    metrics.job_stall_seconds.labels("ddp-3", "1").inc(2.0)
    metrics.job_stall_seconds.labels("other-1", "0").inc(9.0)
    text = generate_latest(metrics.registry).decode()
    assert stall_in(text, "ddp-3") == 3.5
    assert stall_in(text, "nobody") == 0.0
