"""Prometheus metrics of one process (a mount, a cache worker), on a registry the CLI
creates and injects.

No module-level collectors: every process (and every test) builds its own
``Metrics`` over its own ``CollectorRegistry``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.cache_hits = Counter(
            "cloudfs_blockcache_hits", "Block reads served by a cache tier", ["tier"], registry=r
        )
        self.cache_misses = Counter(
            "cloudfs_blockcache_misses",
            "Block reads a cache tier could not serve",
            ["tier"],
            registry=r,
        )
        self.cache_hit_bytes = Counter(
            "cloudfs_blockcache_hit_bytes",
            "Bytes of the blocks a cache tier served (whole blocks, per lookup)",
            ["tier"],
            registry=r,
        )
        self.cache_miss_bytes = Counter(
            "cloudfs_blockcache_miss_bytes",
            "Bytes of the blocks a cache tier could not serve (whole blocks, per lookup)",
            ["tier"],
            registry=r,
        )
        self.cache_evictions = Counter(
            "cloudfs_blockcache_evictions", "Blocks evicted from a cache tier", ["tier"], registry=r
        )
        self.cache_bytes = Gauge(
            "cloudfs_blockcache_bytes", "Bytes held by a cache tier", ["tier"], registry=r
        )
        self.cache_capacity = Gauge(
            "cloudfs_blockcache_capacity_bytes", "Size limit of a cache tier", ["tier"], registry=r
        )
        self.cache_blocks = Gauge(
            "cloudfs_blockcache_blocks", "Blocks held by a cache tier", ["tier"], registry=r
        )
        self.ufs_requests = Counter(
            "cloudfs_ufs_requests", "Requests sent to the UFS", ["op"], registry=r
        )
        self.ufs_errors = Counter(
            "cloudfs_ufs_errors", "UFS requests that failed after retries", ["op"], registry=r
        )
        self.ufs_bytes = Counter(
            "cloudfs_ufs_bytes", "Bytes moved to or from the UFS", ["direction"], registry=r
        )
        self.ufs_latency = Histogram(
            "cloudfs_ufs_request_seconds", "UFS request latency", ["op"], registry=r
        )
        self.fuse_ops = Counter("cloudfs_fuse_ops", "FUSE requests handled", ["op"], registry=r)
        self.fuse_bytes = Counter(
            "cloudfs_fuse_bytes",
            "Bytes read or written through the mount (page-cache hits not included)",
            ["direction"],
            registry=r,
        )
        self.fuse_errors = Counter(
            "cloudfs_fuse_errors",
            "FUSE requests answered with an error",
            ["op", "errno"],
            registry=r,
        )
        self.fuse_latency = Histogram(
            "cloudfs_fuse_op_seconds",
            "FUSE request latency",
            ["op"],
            registry=r,
            buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0),
        )
        # (ioctls answered in C, requests queued for Python, event-loop wake-ups), from
        # the patched pyfuse3's receiver thread (deploy/pyfuse3/receive-loop.patch).
        self.fuse_receiver_view: Callable[[], tuple[int, int, int]] | None = None
        r.register(_FuseReceiver(self))
        self.kernel_invalidations = Counter(
            "cloudfs_kernel_invalidations",
            "Inodes (attributes and pages) and names the mount told the kernel to forget"
            " because they changed behind its back",
            ["kind"],
            registry=r,
        )
        self._job_metrics(r)
        self._peer_metrics(r)
        self.prefetch_bytes = Counter(
            "cloudfs_prefetch_bytes", "Bytes fetched ahead of readers or by warm-up", registry=r
        )
        self.prefetch_used_bytes = Counter(
            "cloudfs_prefetch_used_bytes",
            "Prefetched bytes in memory that a read was then served from",
            registry=r,
        )
        self.prefetch_wasted_bytes = Counter(
            "cloudfs_prefetch_wasted_bytes",
            "Prefetched bytes the memory tier dropped before any read used them",
            registry=r,
        )
        self.writeback_files = Gauge(
            "cloudfs_writeback_pending_files",
            "Closed files whose bytes are not in the UFS yet (write-back backlog)",
            registry=r,
        )
        self.writeback_bytes = Gauge(
            "cloudfs_writeback_pending_bytes", "Bytes of the write-back backlog", registry=r
        )
        self.writeback_oldest_age = Gauge(
            "cloudfs_writeback_oldest_age_seconds",
            "Seconds since the oldest file of the write-back backlog was closed",
            registry=r,
        )
        self.writeback_overdue_files = Gauge(
            "cloudfs_writeback_overdue_files",
            "Backlog files older than the upload deadline",
            registry=r,
        )
        self.writeback_uploads = Counter(
            "cloudfs_writeback_uploads", "Upload attempts by result", ["result"], registry=r
        )
        self.writeback_retries = Counter(
            "cloudfs_writeback_retries", "Uploads retried after a failure", registry=r
        )
        self.writeback_uploaded_bytes = Counter(
            "cloudfs_writeback_uploaded_bytes", "Bytes uploaded by write-back", registry=r
        )

    def _peer_metrics(self, r: CollectorRegistry) -> None:
        """A cache group (``cloudfs.peers``): a mount's view of each member, and a worker's own."""
        self.peer_requests = Counter(
            "cloudfs_peer_requests",
            "Blocks asked of a cache-group member, by result: hit (it held the block), miss "
            "(it fetched the block from the UFS), error (this process fetched it itself)",
            ["member", "result"],
            registry=r,
        )
        self.peer_bytes = Counter(
            "cloudfs_peer_bytes", "Block bytes received from a cache-group member", ["member"],
            registry=r,
        )  # fmt: skip
        self.peer_latency = Histogram(
            "cloudfs_peer_request_seconds",
            "Time a cache-group member took to answer for a block",
            ["member"],
            registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
        )
        self.peer_backoffs = Counter(
            "cloudfs_peer_backoffs",
            "Times a cache-group member failed and was left out for a while",
            ["member"],
            registry=r,
        )
        self.peer_members_view: Callable[[], Iterable[tuple[str, bool]]] | None = None
        r.register(_MembersUp(self))
        self.worker_blocks = Counter(
            "cloudfs_worker_blocks",
            "Blocks a cache worker was asked for, by where it found them (memory, disk, "
            "origin: fetched from the UFS) or the error it answered",
            ["source"],
            registry=r,
        )
        self.worker_bytes = Counter(
            "cloudfs_worker_bytes", "Block bytes a cache worker served", ["source"], registry=r
        )
        self.tree_detached = Gauge(
            "cloudfs_tree_detached_seconds",
            "How long this mount has run detached, answering reads from what it knows, "
            "because the tree service is unreachable (0: attached)",
            registry=r,
        )
        self.tree_journaled = Gauge(
            "cloudfs_tree_journaled_changes",
            "Namespace changes a write-back mount made while the tree service was "
            "unreachable, journaled and not yet replayed",
            registry=r,
        )
        self.tree_conflicts = Gauge(
            "cloudfs_tree_replay_conflicts",
            "Journaled changes whose replay met a conflict (logged; a create whose name "
            "was taken lands as NAME.detached-INODE), since the mount started",
            registry=r,
        )
        self.peer_group_size = Gauge(
            "cloudfs_peer_group_size",
            "Members of the cache group as this mount sees it now (its ring)",
            registry=r,
        )
        self.peer_group_lookups = Counter(
            "cloudfs_peer_group_lookups",
            "Cache-group membership asked of the tree service, by result (ok, error)",
            ["result"],
            registry=r,
        )

    def _job_metrics(self, r: CollectorRegistry) -> None:
        """Per announced job and rank (``cloudfs.epoch``); a job's series stay, marked
        finished, for a grace period after it ends (``cloudfs.epoch.finished``), then go."""
        labels = ["job", "rank"]
        self.job_read_files = Counter(
            "cloudfs_job_read_files", "Files of its order the job read", labels, registry=r
        )
        self.job_read_bytes = Counter(
            "cloudfs_job_read_bytes", "Bytes the job read through the mount", labels, registry=r
        )
        self.job_hit_bytes = Counter(
            "cloudfs_job_hit_bytes",
            "Bytes the job read that a cache tier held from before this epoch's prefetch",
            labels,
            registry=r,
        )
        self.job_prefetch_hit_bytes = Counter(
            "cloudfs_job_prefetch_hit_bytes",
            "Bytes the job read that a tier held because the prefetch fetched them ahead",
            labels,
            registry=r,
        )
        self.job_stall_seconds = Counter(
            "cloudfs_job_stall_seconds",
            "Time the job's reads waited for the UFS (data stalls)",
            labels,
            registry=r,
        )
        self.job_prefetched_bytes = Counter(
            "cloudfs_job_prefetched_bytes",
            "Bytes fetched ahead of the job along its announced order",
            labels,
            registry=r,
        )
        self.job_prefetch_unused_bytes = Counter(
            "cloudfs_job_prefetch_unused_bytes",
            "Bytes fetched ahead that the job had not read when its order ended",
            labels,
            registry=r,
        )
        self.job_prefetch_lead = Gauge(
            "cloudfs_job_prefetch_lead_files",
            "Files fetched ahead of the job's position in its order, not read yet",
            labels,
            registry=r,
        )
        self.job_next_epoch_cached = Gauge(
            "cloudfs_job_next_epoch_cached_ratio",
            "Fraction of the bytes of the job's announced epoch cached when it was announced",
            labels,
            registry=r,
        )
        self.job_epoch = Gauge("cloudfs_job_epoch", "The job's epoch", labels, registry=r)
        self.job_position = Gauge(
            "cloudfs_job_position_files", "Files of its order the job is past", labels, registry=r
        )
        self.job_order_files = Gauge(
            "cloudfs_job_order_files", "Files in the job's announced order", labels, registry=r
        )
        self.job_finished = Gauge(
            "cloudfs_job_finished",
            "1 once the job ended (its series keep their final values for a grace period), "
            "0 while it runs",
            labels,
            registry=r,
        )

    def job_series(self) -> list[Counter | Gauge]:
        """Every per-job metric, for dropping a job's series when it ends."""
        return [
            self.job_read_files,
            self.job_read_bytes,
            self.job_hit_bytes,
            self.job_prefetch_hit_bytes,
            self.job_stall_seconds,
            self.job_prefetched_bytes,
            self.job_prefetch_unused_bytes,
            self.job_prefetch_lead,
            self.job_next_epoch_cached,
            self.job_epoch,
            self.job_position,
            self.job_order_files,
            self.job_finished,
        ]


class _MembersUp(Collector):
    """``cloudfs_peer_member_up{member}``: the cache group's ring as the process sees it at
    scrape time (1 in use, 0 left out for a back-off), from ``peer_members_view``, which
    the ``PeerGroup`` sets: its membership may change while the mount runs."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        view = self._metrics.peer_members_view
        if view is None:
            return
        family = GaugeMetricFamily(
            "cloudfs_peer_member_up",
            "Members of the cache group: 1 asked for blocks, 0 left out for a back-off",
            labels=["member"],
        )
        for member, up in view():
            family.add_metric([member], 1.0 if up else 0.0)
        yield family


class _FuseReceiver(Collector):
    """What the C thread reading ``/dev/fuse`` did, at scrape time, from
    ``fuse_receiver_view`` (set by the mount when its pyfuse3 has the receiver):
    requests it answered itself, without the event loop, and how often it woke the
    loop for the requests it queued (fewer wake-ups than requests: batches)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[CounterMetricFamily]:
        view = self._metrics.fuse_receiver_view
        if view is None:
            return
        ioctls, queued, wakeups = view()
        answered = CounterMetricFamily(
            "cloudfs_fuse_answered_in_c",
            "FUSE requests answered by the C receiver thread, never reaching Python",
            labels=["op"],
        )
        answered.add_metric(["ioctl"], float(ioctls))
        yield answered
        yield CounterMetricFamily(
            "cloudfs_fuse_queued",
            "FUSE requests the C receiver thread queued for the event loop",
            value=float(queued),
        )
        yield CounterMetricFamily(
            "cloudfs_fuse_loop_wakeups",
            "Times the C receiver thread woke the event loop for queued requests",
            value=float(wakeups),
        )


# -- the S3 gateway (``cloudfs gateway s3``) ------------------------------------------


class GatewayMetrics:
    """The S3 gateway's own series, on the registry of the process's ``Metrics`` (whose
    block-cache and UFS series count the reads and writes of the gateway's volumes, so
    the hit ratio is the mount's: ``cloudfs_blockcache_hits / (hits + misses)``)."""

    def __init__(self, metrics: Metrics) -> None:
        r = metrics.registry
        self.requests = Counter(
            "cloudfs_gateway_requests",
            "S3 requests answered by the gateway, by operation and HTTP status",
            ["op", "status"],
            registry=r,
        )
        self.bytes = Counter(
            "cloudfs_gateway_bytes",
            "Object bytes received (in) and sent (out) by the gateway, by operation",
            ["op", "direction"],
            registry=r,
        )
        self.latency = Histogram(
            "cloudfs_gateway_request_seconds",
            "S3 request latency, to the last byte of the answer",
            ["op"],
            registry=r,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0),
        )
        self.in_flight = Gauge(
            "cloudfs_gateway_requests_in_flight", "S3 requests being served", registry=r
        )
