"""The discrete-event simulation: jobs arrive, are placed, read their epochs and finish.

Model (simulated, not a cluster):

- Each epoch reads the job's whole dataset once, block by block, in a new
  random order (training shuffles); the order comes from the seed and the job
  id, so every policy sees the same reads.
- A block held by the node's cache is read at the node's warm rate, shared
  equally by that node's jobs reading warm blocks at that moment; any other
  block at the per-reader cold rate, capped by an equal share of the
  cluster's origin link among all jobs reading cold blocks at that moment (no
  cap when the link rate is 0). Shares are fluid: every read in a group is
  re-rated whenever a read joins or leaves it (processor sharing).
- A cold block enters the node's cache when its read ends (the cache fills as
  read) and evicts least recently used blocks; a warm block is touched. Two
  jobs on one node missing the same block both read it from the origin.
- Jobs take GPUs on one node for their whole run; reading is the only work
  (no compute time, so completion times are I/O bound).
- Queued jobs are offered to the policy in arrival order at every event; a
  later job may start while an earlier one still waits (backfill).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .model import MIB, BlockLRU, Dataset, Job, Node
from .placement import Placement

_DONE, _ARRIVE, _WAKE = 0, 1, 2  # same-time order: finished reads free GPUs before arrivals


@dataclass(frozen=True)
class Rates:
    """Read rates in MiB/s."""

    warm_mibs: float
    """A node's cache, shared by its jobs reading warm blocks at once."""
    cold_mibs: float
    """One job reading blocks its node does not hold, from the origin through the mount."""
    origin_link_mibs: float = 0.0
    """The cluster's origin link, shared by all jobs reading cold blocks at once; 0 = no cap."""


@dataclass(frozen=True)
class JobResult:
    job_id: int
    dataset: str
    node: str
    arrival_s: float
    start_s: float
    finish_s: float
    read_bytes: int
    cached_bytes: int
    origin_bytes: int

    @property
    def completion_s(self) -> float:
        """Arrival to finish, queueing included."""
        return self.finish_s - self.arrival_s


@dataclass(frozen=True)
class SimResult:
    policy: str
    jobs: tuple[JobResult, ...]


def make_nodes(count: int, gpus: int, cache_bytes: int) -> list[Node]:
    """`count` empty nodes named node-0, node-1, ..."""
    return [Node(f"node-{i}", gpus, BlockLRU(cache_bytes)) for i in range(count)]


def warm_node(node: Node, dataset: Dataset, block_bytes: int) -> None:
    """Fill the node's cache with the dataset's blocks in order (as far as it holds)."""
    for index in range(dataset.block_count(block_bytes)):
        node.cache.insert((dataset.name, index), dataset.block_size(index, block_bytes))


@dataclass
class _Reader:
    job: Job
    node: Node
    dataset: Dataset
    rng: random.Random
    start_s: float
    order: list[int] = field(default_factory=list)
    pos: int = 0
    epoch: int = 0
    hit: bool = False
    remaining: float = 0.0
    """Bytes of the current block still to read, as of `since`."""
    rate: float = 0.0
    """Bytes per second for the current block, until the next re-rating."""
    since: float = 0.0
    version: int = 0
    """Bumped at each re-rating; a DONE event of an older version is stale."""
    read_bytes: int = 0
    cached_bytes: int = 0
    origin_bytes: int = 0


class _Simulation:
    def __init__(
        self,
        datasets: Mapping[str, Dataset],
        nodes: Sequence[Node],
        rates: Rates,
        policy: Placement,
        block_bytes: int,
        seed: int,
    ) -> None:
        self.datasets = datasets
        self.nodes = nodes
        self.rates = rates
        self.policy = policy
        self.block_bytes = block_bytes
        self.seed = seed
        self.now = 0.0
        self.events: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.jobs: dict[int, Job] = {}
        self.queue: list[Job] = []
        self.readers: dict[int, _Reader] = {}
        self.cold: set[int] = set()
        self.warm: dict[str, set[int]] = {node.name: set() for node in nodes}
        self.done: list[JobResult] = []

    def push(self, at: float, kind: int, job_id: int, version: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, kind, self.seq, job_id, version))

    def run(self, jobs: Sequence[Job]) -> list[JobResult]:
        most_gpus = max((node.gpus for node in self.nodes), default=0)
        for job in jobs:
            if job.gpus > most_gpus:
                raise ValueError(f"job {job.job_id} needs {job.gpus} GPUs; no node has that many")
            if job.dataset not in self.datasets:
                raise ValueError(f"job {job.job_id} reads unknown dataset {job.dataset!r}")
            if job.epochs < 1 or self.datasets[job.dataset].size_bytes <= 0:
                raise ValueError(f"job {job.job_id} reads nothing (no epochs or an empty dataset)")
            self.jobs[job.job_id] = job
            self.push(job.arrival_s, _ARRIVE, job.job_id)
        while self.events:
            at, kind, _, job_id, version = heapq.heappop(self.events)
            if kind == _DONE and self.stale(job_id, version):
                continue
            self.now = at
            if kind == _ARRIVE:
                self.queue.append(self.jobs[job_id])
                if self.policy.max_wait_s > 0:
                    self.push(at + self.policy.max_wait_s, _WAKE, job_id)
            elif kind == _DONE:
                self.block_done(self.readers[job_id])
            self.schedule()
        if self.queue:
            raise RuntimeError(f"{self.policy.name} left jobs queued with nothing running")
        return sorted(self.done, key=lambda r: r.job_id)

    def stale(self, job_id: int, version: int) -> bool:
        """A DONE event for a finished job, or one re-rated since (a later event stands)."""
        reader = self.readers.get(job_id)
        return reader is None or reader.version != version

    def schedule(self) -> None:
        for job in list(self.queue):
            dataset = self.datasets[job.dataset]
            node = self.policy.choose(job, dataset, self.nodes, self.now)
            if node is None:
                continue
            if node.free_gpus < job.gpus:
                raise RuntimeError(f"{self.policy.name} put job {job.job_id} on a full node")
            self.queue.remove(job)
            node.used_gpus += job.gpus
            node.running[job.job_id] = job.dataset
            rng = random.Random(f"{self.seed}-{job.job_id}")
            reader = _Reader(job, node, dataset, rng, self.now)
            self.readers[job.job_id] = reader
            self.new_epoch(reader)
            self.start_block(reader)

    def new_epoch(self, reader: _Reader) -> None:
        reader.order = list(range(reader.dataset.block_count(self.block_bytes)))
        reader.rng.shuffle(reader.order)
        reader.pos = 0

    def start_block(self, reader: _Reader) -> None:
        key = (reader.dataset.name, reader.order[reader.pos])
        reader.remaining = float(reader.dataset.block_size(key[1], self.block_bytes))
        reader.since = self.now
        reader.hit = key in reader.node.cache
        if reader.hit:
            reader.node.cache.touch(key)
        group = self.group_of(reader)
        group.add(reader.job.job_id)
        self.rerate(group, reader)

    def group_of(self, reader: _Reader) -> set[int]:
        """The readers sharing a rate with this one: its node's warm readers, or the cold ones."""
        return self.warm[reader.node.name] if reader.hit else self.cold

    def share(self, reader: _Reader, members: int) -> float:
        """Bytes per second for one of `members` readers in the reader's group."""
        if reader.hit:
            return self.rates.warm_mibs * MIB / members
        rate = self.rates.cold_mibs
        if self.rates.origin_link_mibs > 0:
            rate = min(rate, self.rates.origin_link_mibs / members)
        return rate * MIB

    def rerate(self, group: set[int], joined: _Reader | None = None) -> None:
        """Give every read in `group` its new share and move its DONE event."""
        for job_id in group:
            reader = self.readers[job_id]
            rate = self.share(reader, len(group))
            if reader is not joined and rate == reader.rate:
                continue  # its share did not change: its DONE event stands
            if reader is not joined:
                reader.remaining = max(
                    0.0, reader.remaining - reader.rate * (self.now - reader.since)
                )
            reader.since = self.now
            reader.rate = rate
            reader.version += 1
            self.push(self.now + reader.remaining / reader.rate, _DONE, job_id, reader.version)

    def block_done(self, reader: _Reader) -> None:
        key = (reader.dataset.name, reader.order[reader.pos])
        size = reader.dataset.block_size(key[1], self.block_bytes)
        reader.read_bytes += size
        group = self.group_of(reader)
        group.discard(reader.job.job_id)
        reader.rate = 0.0
        self.rerate(group)
        if reader.hit:
            reader.cached_bytes += size
        else:
            reader.origin_bytes += size
            reader.node.cache.insert(key, size)
        reader.pos += 1
        if reader.pos == len(reader.order):
            reader.epoch += 1
            if reader.epoch == reader.job.epochs:
                self.finish(reader)
                return
            self.new_epoch(reader)
        self.start_block(reader)

    def finish(self, reader: _Reader) -> None:
        job, node = reader.job, reader.node
        node.used_gpus -= job.gpus
        del node.running[job.job_id]
        del self.readers[job.job_id]
        self.done.append(
            JobResult(
                job_id=job.job_id,
                dataset=job.dataset,
                node=node.name,
                arrival_s=job.arrival_s,
                start_s=reader.start_s,
                finish_s=self.now,
                read_bytes=reader.read_bytes,
                cached_bytes=reader.cached_bytes,
                origin_bytes=reader.origin_bytes,
            )
        )


def simulate(
    jobs: Sequence[Job],
    datasets: Mapping[str, Dataset],
    nodes: Sequence[Node],
    rates: Rates,
    policy: Placement,
    block_bytes: int,
    seed: int,
) -> SimResult:
    """Run every job to completion on `nodes` (mutated: their caches fill) under `policy`.

    Raises ValueError for a job no node can ever take, with an unknown or empty
    dataset, or with no epochs.
    """
    if block_bytes <= 0:
        raise ValueError("block_bytes must be positive")
    sim = _Simulation(datasets, nodes, rates, policy, block_bytes, seed)
    return SimResult(policy.name, tuple(sim.run(jobs)))
