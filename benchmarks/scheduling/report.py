"""Figures of one simulated run, and medians and ratios over repeats."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from .engine import SimResult

METRICS = ("mean_jct_s", "p95_jct_s", "makespan_s", "origin_gib", "hit_ratio", "mean_queue_s")
"""Per-run figures: job completion time (arrival to finish) mean and p95, first
arrival to last finish, bytes read from the origin, cached / read bytes, and
arrival to start."""


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear between closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(result: SimResult) -> dict[str, float]:
    """METRICS of one run."""
    jobs = result.jobs
    if not jobs:
        raise ValueError("a run with no jobs")
    completion = [job.completion_s for job in jobs]
    read = sum(job.read_bytes for job in jobs)
    return {
        "mean_jct_s": statistics.fmean(completion),
        "p95_jct_s": percentile(completion, 95),
        "makespan_s": max(job.finish_s for job in jobs) - min(job.arrival_s for job in jobs),
        "origin_gib": sum(job.origin_bytes for job in jobs) / (1 << 30),
        "hit_ratio": sum(job.cached_bytes for job in jobs) / read if read else 0.0,
        "mean_queue_s": statistics.fmean(job.start_s - job.arrival_s for job in jobs),
    }


def medians(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each metric's median over repeats."""
    return {name: statistics.median(run[name] for run in runs) for name in METRICS}


def paired_ratios(
    aware: Sequence[Mapping[str, float]], blind: Sequence[Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    """aware / blind per metric, per repeat (same seed), as median, min and max.

    A metric whose blind figure is 0 in some repeat is left out.
    """
    out: dict[str, dict[str, float]] = {}
    for name in METRICS:
        if any(b[name] == 0 for b in blind):
            continue
        ratios = [a[name] / b[name] for a, b in zip(aware, blind, strict=True)]
        out[name] = {
            "median": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
        }
    return out
