"""Placement policies: which node a queued job starts on, or whether it waits.

Cache-blind policies stand in for kube-scheduler without the extender
(`first-fit`, `random`, and `least-loaded`, the default spreading of its
LeastAllocated score). `aware` scores nodes like the CloudFS scheduler
extender: 10 x the node's cached bytes of the job's dataset over the most any
candidate holds (an integer 0-10, as extender priorities are), ties to the
least loaded node. `aware-wait` may also leave a job queued for a bounded time
while a busy node holds its dataset, like a readiness threshold.
`aware-nomix` first avoids nodes whose running jobs read other datasets (they
would evict the blocks the score counted), then scores as `aware`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

from .model import Dataset, Job, Node

MAX_SCORE = 10


class Placement(Protocol):
    """Chooses a node for a job. Called again at every scheduling event while it waits."""

    name: str
    max_wait_s: float
    """How long past its arrival this policy may hold a job back; 0 = never."""

    def choose(self, job: Job, dataset: Dataset, nodes: Sequence[Node], now: float) -> Node | None:
        """The node to start `job` on now, or None to leave it queued.

        `nodes` is every node in a fixed order, busy ones included; a policy
        returns only a node with `free_gpus >= job.gpus`.
        """
        ...


def candidates(job: Job, nodes: Sequence[Node]) -> list[Node]:
    """Nodes with enough free GPUs for the job, in node order."""
    return [node for node in nodes if node.free_gpus >= job.gpus]


def least_loaded(nodes: Sequence[Node]) -> Node:
    """The node with the most free GPUs; the first such in node order on a tie."""
    return max(nodes, key=lambda node: node.free_gpus)


class FirstFit:
    """The first node in order with free GPUs (bin packing)."""

    name = "first-fit"
    max_wait_s = 0.0

    def choose(self, job: Job, dataset: Dataset, nodes: Sequence[Node], now: float) -> Node | None:
        fits = candidates(job, nodes)
        return fits[0] if fits else None


class RandomFit:
    """A random node with free GPUs."""

    name = "random"
    max_wait_s = 0.0

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def choose(self, job: Job, dataset: Dataset, nodes: Sequence[Node], now: float) -> Node | None:
        fits = candidates(job, nodes)
        return self._rng.choice(fits) if fits else None


class LeastLoaded:
    """The node with the most free GPUs (kube-scheduler's default spreading)."""

    name = "least-loaded"
    max_wait_s = 0.0

    def choose(self, job: Job, dataset: Dataset, nodes: Sequence[Node], now: float) -> Node | None:
        fits = candidates(job, nodes)
        return least_loaded(fits) if fits else None


def cache_scores(dataset: Dataset, nodes: Sequence[Node]) -> list[int]:
    """10 x cached / max cached over `nodes`, as integers; all 0 when none holds any."""
    cached = [node.cache.cached_bytes(dataset.name) for node in nodes]
    top = max(cached, default=0)
    if top == 0:
        return [0] * len(cached)
    return [MAX_SCORE * c // top for c in cached]


def holds_ready(node: Node, dataset: Dataset, ready_fraction: float) -> bool:
    """Whether the node holds `ready_fraction` of what its cache can hold of the dataset."""
    holdable = min(dataset.size_bytes, node.cache.capacity_bytes)
    return holdable > 0 and node.cache.cached_bytes(dataset.name) >= ready_fraction * holdable


class CacheAware:
    """Highest cache score first, then least loaded; optionally waits for a ready node.

    With `max_wait_s` > 0: when no free node is ready (holds `ready_fraction`
    of what it can of the dataset) but a busy one is, the job stays queued
    until such a node frees up or `max_wait_s` after its arrival, whichever
    comes first.

    With `avoid_mixing`: nodes whose running jobs read fewer other datasets
    come first, then the score, then the load.
    """

    def __init__(
        self, max_wait_s: float = 0.0, ready_fraction: float = 0.8, avoid_mixing: bool = False
    ) -> None:
        self.max_wait_s = max_wait_s
        self.ready_fraction = ready_fraction
        self.avoid_mixing = avoid_mixing
        self.name = "aware-wait" if max_wait_s > 0 else "aware"
        if avoid_mixing:
            self.name = self.name.replace("aware", "aware-nomix")

    def choose(self, job: Job, dataset: Dataset, nodes: Sequence[Node], now: float) -> Node | None:
        fits = candidates(job, nodes)
        if not fits:
            return None
        scores = cache_scores(dataset, fits)
        mixing = [node.other_datasets(dataset.name) if self.avoid_mixing else 0 for node in fits]
        best = max(range(len(fits)), key=lambda i: (-mixing[i], scores[i], fits[i].free_gpus, -i))
        chosen = fits[best]
        if self._should_wait(job, dataset, chosen, nodes, now):
            return None
        return chosen

    def _should_wait(
        self, job: Job, dataset: Dataset, chosen: Node, nodes: Sequence[Node], now: float
    ) -> bool:
        if self.max_wait_s <= 0 or now >= job.arrival_s + self.max_wait_s:
            return False
        if holds_ready(chosen, dataset, self.ready_fraction):
            return False
        return any(
            holds_ready(node, dataset, self.ready_fraction) and node.gpus >= job.gpus
            for node in nodes
        )


POLICY_NAMES = ("first-fit", "random", "least-loaded", "aware", "aware-wait", "aware-nomix")


def make_policy(name: str, seed: int, max_wait_s: float, ready_fraction: float) -> Placement:
    """The policy called `name` (one of POLICY_NAMES)."""
    if name == "first-fit":
        return FirstFit()
    if name == "random":
        return RandomFit(random.Random(seed))
    if name == "least-loaded":
        return LeastLoaded()
    if name == "aware":
        return CacheAware()
    if name == "aware-wait":
        return CacheAware(max_wait_s=max_wait_s, ready_fraction=ready_fraction)
    if name == "aware-nomix":
        return CacheAware(avoid_mixing=True)
    raise ValueError(f"unknown policy {name!r}; one of {', '.join(POLICY_NAMES)}")
