"""The model of ``cloudfs stats``: exposition text -> snapshot -> interval rates.

Nothing here does I/O. ``parse_snapshot`` reads the Prometheus text a mount
returns for ``{"op": "metrics"}`` (with ``prometheus_client``'s parser) into a
``Snapshot``; ``Interval.between`` turns two snapshots into per-second rates
and interval ratios. Counters that went backwards (the mount was restarted
between two snapshots) count from zero, as Prometheus' ``rate`` does. The
``--json`` object is ``stats_json.py``'s, the live view's lines ``stats_view.py``'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from cloudfs.cli.stats_gateway import OpRow, parse_gateway
from cloudfs.cli.stats_group import MemberRow, parse_group
from cloudfs.cli.stats_jobs import JobRow, parse_jobs

Labels = frozenset[tuple[str, str]]
Samples = dict[tuple[str, Labels], float]


# -- snapshot --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Histogram:
    """One histogram series: cumulative ``(upper bound, count)`` pairs, ``+Inf`` last."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    sum: float

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        """The ``q``-quantile estimated as PromQL's ``histogram_quantile`` does.

        Linear interpolation inside the bucket holding the rank (the first bucket
        starts at 0); a rank in the ``+Inf`` bucket gives the highest finite bound.
        None without observations.
        """
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile {q} is not within [0, 1]")
        if not self.buckets or self.buckets[-1][1] <= 0:
            return None
        total = self.buckets[-1][1]
        rank = q * total
        lower_bound, lower_count = 0.0, 0.0
        for bound, cumulative in self.buckets:
            if cumulative >= rank and cumulative > lower_count:
                if math.isinf(bound):
                    return lower_bound if len(self.buckets) > 1 else None
                if bound <= 0:
                    return bound
                share = (rank - lower_count) / (cumulative - lower_count)
                return lower_bound + (bound - lower_bound) * share
            lower_bound, lower_count = bound, cumulative
        return lower_bound

    def minus(self, earlier: Histogram) -> Histogram:
        """The observations made since ``earlier`` (everything after a reset)."""
        if self.count < earlier.count or len(self.buckets) != len(earlier.buckets):
            return self
        buckets = tuple(
            (bound, count - before)
            for (bound, count), (_, before) in zip(self.buckets, earlier.buckets, strict=True)
        )
        return Histogram(buckets, self.count - earlier.count, self.sum - earlier.sum)


EMPTY_HISTOGRAM = Histogram((), 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class Tier:
    """One block-cache tier's counters and occupancy."""

    hits: float = 0.0
    misses: float = 0.0
    hit_bytes: float = 0.0
    miss_bytes: float = 0.0
    evictions: float = 0.0
    bytes: float = 0.0
    blocks: float = 0.0
    capacity_bytes: float = 0.0  # the tier's own gauge; 0 where it publishes none

    @property
    def hit_ratio(self) -> float | None:
        return ratio(self.hits, self.hits + self.misses)


@dataclass(frozen=True, slots=True)
class WriteBack:
    """The write-back backlog (gauges) and upload counters since mount."""

    files: float = 0.0
    bytes: float = 0.0
    oldest_age: float = 0.0
    overdue: float = 0.0
    uploaded_bytes: float = 0.0
    failures: float = 0.0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything ``cloudfs stats`` shows of one answer to ``{"op": "metrics"}``."""

    taken_at: float  # time.monotonic() when it was fetched
    facts: Mapping[str, Any]
    tiers: Mapping[str, Tier]
    fuse_ops: Mapping[str, float]
    fuse_bytes: Mapping[str, float]  # by direction: read, write
    fuse_errors: Mapping[str, float]  # by op, every errno together
    fuse_latency: Mapping[str, Histogram]
    ufs_requests: Mapping[str, float]
    ufs_bytes: Mapping[str, float]  # by direction, as the UFS layer labels it
    ufs_errors: Mapping[str, float]
    ufs_latency: Mapping[str, Histogram]
    prefetch_bytes: float = 0.0
    prefetch_used_bytes: float = 0.0
    prefetch_wasted_bytes: float = 0.0
    # by op: requests the patched pyfuse3's C thread answered without Python
    fuse_answered_in_c: Mapping[str, float] = field(default_factory=dict)
    fuse_loop_wakeups: float = 0.0  # times that thread woke the event loop
    writeback: WriteBack = field(default_factory=lambda: WriteBack())
    jobs: Sequence[JobRow] = ()
    group: Sequence[MemberRow] = ()  # the cache group's members, as the mount sees them
    gateway: Sequence[OpRow] = ()  # an S3 gateway's operations
    tree_detached_seconds: float = 0.0  # >0: the tree service is unreachable, reads local
    tree_journaled_changes: float = 0.0  # write-back: changes made detached, not replayed

    def capacity(self, tier: str) -> int | None:
        """A tier's size limit: its ``cloudfs_blockcache_capacity_bytes`` gauge, else the
        configured size among the mount's facts (``memory_bytes``, ``disk_bytes``)."""
        held = self.tiers.get(tier)
        if held is not None and held.capacity_bytes > 0:
            return int(held.capacity_bytes)
        value = self.facts.get(f"{tier}_bytes")
        return int(value) if isinstance(value, int | float) and value > 0 else None


def parse_samples(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = float(s.value)
    return samples


def parse_snapshot(text: str, facts: Mapping[str, Any], taken_at: float) -> Snapshot:
    """A ``Snapshot`` of the exposition ``text``; series not there yet read as 0."""
    samples = parse_samples(text)
    hits = by_label(samples, "cloudfs_blockcache_hits_total", "tier")
    misses = by_label(samples, "cloudfs_blockcache_misses_total", "tier")
    hit_bytes = by_label(samples, "cloudfs_blockcache_hit_bytes_total", "tier")
    miss_bytes = by_label(samples, "cloudfs_blockcache_miss_bytes_total", "tier")
    evictions = by_label(samples, "cloudfs_blockcache_evictions_total", "tier")
    held = by_label(samples, "cloudfs_blockcache_bytes", "tier")
    blocks = by_label(samples, "cloudfs_blockcache_blocks", "tier")
    capacity = by_label(samples, "cloudfs_blockcache_capacity_bytes", "tier")
    names = sorted(
        set(hits) | set(misses) | set(held) | set(blocks) | set(evictions),
        key=lambda t: (_TIER_ORDER.get(t, len(_TIER_ORDER)), t),
    )
    tiers = {
        t: Tier(
            hits=hits.get(t, 0.0),
            misses=misses.get(t, 0.0),
            hit_bytes=hit_bytes.get(t, 0.0),
            miss_bytes=miss_bytes.get(t, 0.0),
            evictions=evictions.get(t, 0.0),
            bytes=held.get(t, 0.0),
            blocks=blocks.get(t, 0.0),
            capacity_bytes=capacity.get(t, 0.0),
        )
        for t in names
    }
    return Snapshot(
        taken_at=taken_at,
        facts=dict(facts),
        tiers=tiers,
        fuse_ops=by_label(samples, "cloudfs_fuse_ops_total", "op"),
        fuse_bytes=by_label(samples, "cloudfs_fuse_bytes_total", "direction"),
        fuse_errors=by_label(samples, "cloudfs_fuse_errors_total", "op"),
        fuse_latency=histograms(samples, "cloudfs_fuse_op_seconds", "op"),
        ufs_requests=by_label(samples, "cloudfs_ufs_requests_total", "op"),
        ufs_bytes=by_label(samples, "cloudfs_ufs_bytes_total", "direction"),
        ufs_errors=by_label(samples, "cloudfs_ufs_errors_total", "op"),
        ufs_latency=histograms(samples, "cloudfs_ufs_request_seconds", "op"),
        prefetch_bytes=total(samples, "cloudfs_prefetch_bytes_total"),
        prefetch_used_bytes=total(samples, "cloudfs_prefetch_used_bytes_total"),
        prefetch_wasted_bytes=total(samples, "cloudfs_prefetch_wasted_bytes_total"),
        fuse_answered_in_c=by_label(samples, "cloudfs_fuse_answered_in_c_total", "op"),
        fuse_loop_wakeups=total(samples, "cloudfs_fuse_loop_wakeups_total"),
        writeback=WriteBack(
            files=total(samples, "cloudfs_writeback_pending_files"),
            bytes=total(samples, "cloudfs_writeback_pending_bytes"),
            oldest_age=total(samples, "cloudfs_writeback_oldest_age_seconds"),
            overdue=total(samples, "cloudfs_writeback_overdue_files"),
            uploaded_bytes=total(samples, "cloudfs_writeback_uploaded_bytes_total"),
            failures=by_label(samples, "cloudfs_writeback_uploads_total", "result").get(
                "error", 0.0
            ),
        ),
        tree_detached_seconds=total(samples, "cloudfs_tree_detached_seconds"),
        tree_journaled_changes=total(samples, "cloudfs_tree_journaled_changes"),
        jobs=parse_jobs(samples),
        group=parse_group(samples),
        gateway=parse_gateway(
            samples,
            {op: h.quantile(0.99) for op, h in histograms(samples, GATEWAY_SECONDS, "op").items()},
        ),
    )


_TIER_ORDER = {"memory": 0, "disk": 1}
GATEWAY_SECONDS = "cloudfs_gateway_request_seconds"


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    """The series of ``name`` summed by the value of ``label`` (PromQL ``sum by``)."""
    out: dict[str, float] = {}
    for (n, labels), value in samples.items():
        if n == name:
            key = dict(labels).get(label, "")
            out[key] = out.get(key, 0.0) + value
    return out


def total(samples: Samples, name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def histograms(samples: Samples, name: str, label: str) -> dict[str, Histogram]:
    """Every series of histogram ``name``, by ``label`` (other labels summed)."""
    buckets: dict[str, dict[float, float]] = {}
    counts: dict[str, float] = {}
    sums: dict[str, float] = {}
    for (n, labels), value in samples.items():
        ls = dict(labels)
        key = ls.get(label, "")
        if n == f"{name}_bucket" and "le" in ls:
            per = buckets.setdefault(key, {})
            le = float(ls["le"])
            per[le] = per.get(le, 0.0) + value
        elif n == f"{name}_count":
            counts[key] = counts.get(key, 0.0) + value
        elif n == f"{name}_sum":
            sums[key] = sums.get(key, 0.0) + value
    return {
        key: Histogram(
            tuple(sorted(buckets.get(key, {}).items())), counts.get(key, 0.0), sums.get(key, 0.0)
        )
        for key in sorted(set(buckets) | set(counts))
    }


def ratio(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


# -- two snapshots ---------------------------------------------------------------------


def increase(before: float, after: float) -> float:
    """How much a counter grew; a counter that went back was reset and counts from 0."""
    return after - before if after >= before else after


def _increases(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    return {k: increase(before.get(k, 0.0), v) for k, v in after.items()}


@dataclass(frozen=True, slots=True)
class Interval:
    """What happened between two snapshots: increases, and rates per second."""

    seconds: float
    fuse_ops: dict[str, float] = field(default_factory=dict)
    fuse_bytes: dict[str, float] = field(default_factory=dict)
    fuse_errors: float = 0.0
    fuse_latency: dict[str, Histogram] = field(default_factory=dict)
    tiers: dict[str, Tier] = field(default_factory=dict)
    ufs_requests: dict[str, float] = field(default_factory=dict)
    ufs_bytes: dict[str, float] = field(default_factory=dict)
    ufs_errors: float = 0.0
    prefetch_bytes: float = 0.0
    prefetch_used_bytes: float = 0.0
    prefetch_wasted_bytes: float = 0.0

    @classmethod
    def between(cls, before: Snapshot, after: Snapshot) -> Interval:
        if before.facts.get("pid") != after.facts.get("pid"):  # remounted: all anew
            before = parse_snapshot("", after.facts, before.taken_at)
        tiers = {}
        for name, t in after.tiers.items():
            b = before.tiers.get(name, Tier())
            tiers[name] = Tier(
                hits=increase(b.hits, t.hits),
                misses=increase(b.misses, t.misses),
                hit_bytes=increase(b.hit_bytes, t.hit_bytes),
                miss_bytes=increase(b.miss_bytes, t.miss_bytes),
                evictions=increase(b.evictions, t.evictions),
                bytes=t.bytes,
                blocks=t.blocks,
                capacity_bytes=t.capacity_bytes,
            )
        return cls(
            seconds=max(after.taken_at - before.taken_at, 1e-9),
            fuse_ops=_increases(before.fuse_ops, after.fuse_ops),
            fuse_bytes=_increases(before.fuse_bytes, after.fuse_bytes),
            fuse_errors=sum(_increases(before.fuse_errors, after.fuse_errors).values()),
            fuse_latency={
                op: h.minus(before.fuse_latency.get(op, EMPTY_HISTOGRAM))
                for op, h in after.fuse_latency.items()
            },
            tiers=tiers,
            ufs_requests=_increases(before.ufs_requests, after.ufs_requests),
            ufs_bytes=_increases(before.ufs_bytes, after.ufs_bytes),
            ufs_errors=sum(_increases(before.ufs_errors, after.ufs_errors).values()),
            prefetch_bytes=increase(before.prefetch_bytes, after.prefetch_bytes),
            prefetch_used_bytes=increase(before.prefetch_used_bytes, after.prefetch_used_bytes),
            prefetch_wasted_bytes=increase(
                before.prefetch_wasted_bytes, after.prefetch_wasted_bytes
            ),
        )

    def rate(self, amount: float) -> float:
        return amount / self.seconds

    @property
    def fuse_ops_per_s(self) -> float:
        return self.rate(sum(self.fuse_ops.values()))

    @property
    def ufs_requests_per_s(self) -> float:
        return self.rate(sum(self.ufs_requests.values()))

    def fuse_bytes_per_s(self, direction: str) -> float:
        return self.rate(self.fuse_bytes.get(direction, 0.0))
