"""The job queue: datasets and jobs drawn from a seed."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from .model import GIB, Dataset, Job


@dataclass(frozen=True)
class WorkloadSpec:
    jobs: int
    dataset_gib: tuple[float, ...]
    """One dataset per entry; each job reads one, chosen uniformly."""
    gpu_choices: tuple[int, ...]
    """GPUs per job, chosen uniformly."""
    min_epochs: int
    max_epochs: int
    mean_interarrival_s: float
    """Arrivals are a Poisson process with this mean gap; the first job arrives at 0."""


def make_datasets(dataset_gib: Sequence[float]) -> dict[str, Dataset]:
    """Datasets ds-0, ds-1, ... of the given sizes."""
    return {f"ds-{i}": Dataset(f"ds-{i}", int(gib * GIB)) for i, gib in enumerate(dataset_gib)}


def make_jobs(spec: WorkloadSpec, seed: int) -> list[Job]:
    """`spec.jobs` jobs in arrival order; the same seed gives the same jobs."""
    rng = random.Random(seed)
    names = sorted(make_datasets(spec.dataset_gib))
    jobs: list[Job] = []
    at = 0.0
    for job_id in range(spec.jobs):
        if job_id:
            at += rng.expovariate(1.0 / spec.mean_interarrival_s)
        jobs.append(
            Job(
                job_id=job_id,
                dataset=rng.choice(names),
                epochs=rng.randint(spec.min_epochs, spec.max_epochs),
                gpus=rng.choice(spec.gpu_choices),
                arrival_s=at,
            )
        )
    return jobs
