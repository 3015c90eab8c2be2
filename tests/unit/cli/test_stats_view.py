"""``cloudfs stats`` without a mount: exposition -> snapshot -> rates, quantiles, JSON, lines."""

from __future__ import annotations

import argparse
import io
import json
from typing import Any

import pytest
from prometheus_client import generate_latest

from cloudfs.cli import stats
from cloudfs.cli.main import build_parser, main
from cloudfs.cli.stats_json import snapshot_json
from cloudfs.cli.stats_model import EMPTY_HISTOGRAM, Histogram, Interval, Snapshot, parse_snapshot
from cloudfs.cli.stats_view import render
from cloudfs.control import client
from cloudfs.epoch.telemetry import JobTelemetry
from cloudfs.errors import StartupError, UsageError
from cloudfs.metrics import Metrics

MiB = 1024 * 1024
FACTS: dict[str, Any] = {
    "mountpoint": "/mnt/data",
    "ufs": "s3://bucket",
    "pid": 4242,
    "block_size": 4 * MiB,
    "memory_bytes": 256 * MiB,
    "disk_bytes": 10 * 1024 * MiB,
    "cache_policy": "tinylfu",
}


def _workload(m: Metrics, scale: int = 1) -> None:
    """A small read workload, ``scale`` times: what a mount records for it."""
    for _ in range(scale):
        m.fuse_ops.labels("read").inc(10)
        m.fuse_ops.labels("lookup").inc(2)
        m.fuse_ops.labels("open").inc(1)
        m.fuse_bytes.labels("read").inc(10 * MiB)
        for _ in range(9):
            m.fuse_latency.labels("read").observe(0.0003)  # (0.0001, 0.0005]
        m.fuse_latency.labels("read").observe(0.2)  # (0.1, 0.5]
        m.fuse_latency.labels("lookup").observe(0.02)
        m.fuse_latency.labels("lookup").observe(0.02)
        m.fuse_latency.labels("open").observe(0.002)
        m.cache_hits.labels(tier="memory").inc(7)
        m.cache_misses.labels(tier="memory").inc(3)
        m.cache_hit_bytes.labels(tier="memory").inc(7 * 4 * MiB)
        m.cache_miss_bytes.labels(tier="memory").inc(3 * 4 * MiB)
        m.cache_misses.labels(tier="disk").inc(3)
        m.cache_miss_bytes.labels(tier="disk").inc(3 * 4 * MiB)
        m.ufs_requests.labels("get").inc(3)
        m.ufs_bytes.labels("read").inc(12 * MiB)
        m.ufs_latency.labels("get").observe(0.05)
        m.prefetch_bytes.inc(8 * MiB)
        m.prefetch_used_bytes.inc(4 * MiB)
    m.cache_bytes.labels(tier="memory").set(64 * MiB)
    m.cache_blocks.labels(tier="memory").set(16)
    m.cache_bytes.labels(tier="disk").set(12 * MiB)
    m.cache_blocks.labels(tier="disk").set(3)


def _snapshot(m: Metrics, taken_at: float, **facts: Any) -> Snapshot:
    return parse_snapshot(generate_latest(m.registry).decode(), {**FACTS, **facts}, taken_at)


# -- parsing ---------------------------------------------------------------------------


def test_a_real_registry_parses_into_a_snapshot() -> None:
    m = Metrics()
    _workload(m)
    snap = _snapshot(m, 100.0)
    assert list(snap.tiers) == ["memory", "disk"]
    memory, disk = snap.tiers["memory"], snap.tiers["disk"]
    assert (memory.hits, memory.misses, memory.bytes, memory.blocks) == (7, 3, 64 * MiB, 16)
    assert memory.hit_ratio == pytest.approx(0.7)
    assert (disk.hits, disk.misses, disk.hit_ratio) == (0, 3, 0.0)
    assert snap.fuse_ops == {"read": 10, "lookup": 2, "open": 1}
    assert snap.fuse_bytes == {"read": 10 * MiB}
    assert snap.ufs_requests == {"get": 3}
    assert snap.ufs_bytes == {"read": 12 * MiB}
    assert (snap.prefetch_bytes, snap.prefetch_used_bytes, snap.prefetch_wasted_bytes) == (
        8 * MiB, 4 * MiB, 0,
    )  # fmt: skip
    read = snap.fuse_latency["read"]
    assert read.count == 10
    assert read.sum == pytest.approx(9 * 0.0003 + 0.2)
    assert read.buckets[-1] == (float("inf"), 10)
    assert snap.ufs_latency["get"].count == 1
    assert snap.capacity("memory") == 256 * MiB
    assert snap.capacity("nvme") is None


def test_an_empty_registry_reads_as_zeros() -> None:
    snap = _snapshot(Metrics(), 0.0)
    assert snap.tiers == {}
    assert snap.fuse_ops == {} and snap.fuse_latency == {}
    assert snap.prefetch_bytes == 0
    doc = snapshot_json(snap)
    assert doc["fuse"]["bytes"] == {"read": 0, "write": 0}
    assert doc["ufs"]["requests_total"] == 0


HAND_BUILT = """\
# TYPE cloudfs_fuse_errors_total counter
cloudfs_fuse_errors_total{op="lookup",errno="ENOENT"} 5.0
cloudfs_fuse_errors_total{op="lookup",errno="EACCES"} 2.0
cloudfs_fuse_errors_total{op="read",errno="EIO"} 1.0
# TYPE cloudfs_blockcache_hits_total counter
cloudfs_blockcache_hits_total{tier="disk"} 4.0
cloudfs_blockcache_hits_total{tier="nvme"} 1.0
# TYPE cloudfs_blockcache_misses_total counter
cloudfs_blockcache_misses_total{tier="disk"} 1.0
# TYPE cloudfs_fuse_op_seconds histogram
cloudfs_fuse_op_seconds_bucket{le="0.01",op="getattr"} 2.0
cloudfs_fuse_op_seconds_bucket{le="0.1",op="getattr"} 4.0
cloudfs_fuse_op_seconds_bucket{le="+Inf",op="getattr"} 4.0
cloudfs_fuse_op_seconds_count{op="getattr"} 4.0
cloudfs_fuse_op_seconds_sum{op="getattr"} 0.1
"""


def test_a_hand_built_exposition_sums_other_labels_and_orders_tiers() -> None:
    snap = parse_snapshot(HAND_BUILT, FACTS, 0.0)
    assert snap.fuse_errors == {"lookup": 7, "read": 1}
    assert list(snap.tiers) == ["disk", "nvme"]  # known tiers first, then by name
    assert snap.tiers["disk"].hit_ratio == pytest.approx(0.8)
    assert snap.tiers["nvme"].hit_ratio == 1.0
    getattr_h = snap.fuse_latency["getattr"]
    assert getattr_h.buckets == ((0.01, 2), (0.1, 4), (float("inf"), 4))
    assert getattr_h.mean == pytest.approx(0.025)
    assert getattr_h.quantile(0.5) == pytest.approx(0.01)
    assert getattr_h.quantile(0.75) == pytest.approx(0.055)


def test_a_tier_capacity_gauge_wins_over_the_configured_size() -> None:
    text = HAND_BUILT + (
        "# TYPE cloudfs_blockcache_capacity_bytes gauge\n"
        'cloudfs_blockcache_capacity_bytes{tier="disk"} 1000.0\n'
        "# TYPE cloudfs_blockcache_bytes gauge\n"
        'cloudfs_blockcache_bytes{tier="disk"} 250.0\n'
    )
    snap = parse_snapshot(text, FACTS, 0.0)
    assert snap.capacity("disk") == 1000
    assert snap.capacity("nvme") is None
    assert snapshot_json(snap)["tiers"]["disk"]["fill_ratio"] == 0.25
    assert parse_snapshot(HAND_BUILT, FACTS, 0.0).capacity("disk") == FACTS["disk_bytes"]


# -- histogram quantiles ---------------------------------------------------------------


def _hist(*buckets: tuple[float, float]) -> Histogram:
    return Histogram(tuple(buckets), buckets[-1][1], 0.0)


def test_quantiles_interpolate_inside_the_bucket_as_promql_does() -> None:
    h = _hist((0.001, 0), (0.005, 10), (0.01, 20), (float("inf"), 20))
    assert h.quantile(0.5) == pytest.approx(0.005)  # rank 10: the top of (0.001, 0.005]
    assert h.quantile(0.25) == pytest.approx(0.003)  # half-way into (0.001, 0.005]
    assert h.quantile(0.75) == pytest.approx(0.0075)
    assert h.quantile(1.0) == pytest.approx(0.01)


def test_the_first_bucket_starts_at_zero() -> None:
    assert _hist((0.1, 4), (float("inf"), 4)).quantile(0.5) == pytest.approx(0.05)


def test_a_rank_in_the_inf_bucket_gives_the_highest_finite_bound() -> None:
    h = _hist((0.1, 1), (1.0, 1), (float("inf"), 100))
    assert h.quantile(0.99) == 1.0
    assert h.quantile(0.5) == 1.0


def test_no_observations_no_quantile() -> None:
    assert EMPTY_HISTOGRAM.quantile(0.5) is None
    assert _hist((0.1, 0), (float("inf"), 0)).quantile(0.99) is None
    assert _hist((0.1, 0), (float("inf"), 0)).mean is None
    with pytest.raises(ValueError):
        _hist((0.1, 1), (float("inf"), 1)).quantile(1.5)


def test_quantiles_of_a_real_histogram() -> None:
    m = Metrics()
    for _ in range(98):
        m.fuse_latency.labels("read").observe(0.0003)
    m.fuse_latency.labels("read").observe(0.3)
    m.fuse_latency.labels("read").observe(0.3)
    h = _snapshot(m, 0.0).fuse_latency["read"]
    assert 0.0001 < (h.quantile(0.5) or 0) <= 0.0005
    assert h.quantile(0.99) == pytest.approx(0.3)  # rank 99 is half-way into (0.1, 0.5]


def test_histogram_minus_is_the_interval_and_survives_a_reset() -> None:
    before = Histogram(((0.1, 2), (float("inf"), 3)), 3, 1.5)
    after = Histogram(((0.1, 5), (float("inf"), 7)), 7, 2.5)
    assert after.minus(before) == Histogram(((0.1, 3), (float("inf"), 4)), 4, 1.0)
    assert before.minus(after) == before  # went back: a restarted mount, counted from 0
    assert after.minus(EMPTY_HISTOGRAM) == after


# -- two snapshots ---------------------------------------------------------------------


def test_rates_and_interval_hit_ratios_between_two_snapshots() -> None:
    m = Metrics()
    _workload(m)
    first = _snapshot(m, 100.0)
    _workload(m)
    m.cache_hits.labels(tier="memory").inc(10)  # this interval: 17 hits, 3 misses
    second = _snapshot(m, 102.0)
    iv = Interval.between(first, second)
    assert iv.seconds == 2.0
    assert iv.fuse_bytes_per_s("read") == 5 * MiB
    assert iv.fuse_bytes_per_s("write") == 0
    assert iv.fuse_ops_per_s == pytest.approx(13 / 2)
    assert iv.ufs_requests_per_s == pytest.approx(1.5)
    assert iv.rate(iv.ufs_bytes["read"]) == 6 * MiB
    assert iv.tiers["memory"].hit_ratio == pytest.approx(17 / 20)
    assert second.tiers["memory"].hit_ratio == pytest.approx(24 / 30)  # since mount
    assert iv.tiers["disk"].hit_ratio == 0.0
    assert iv.fuse_latency["read"].count == 10
    assert iv.fuse_latency["read"].mean == pytest.approx((9 * 0.0003 + 0.2) / 10)
    assert iv.prefetch_bytes == 8 * MiB


def test_an_idle_interval_has_no_hit_ratio() -> None:
    m = Metrics()
    _workload(m)
    iv = Interval.between(_snapshot(m, 1.0), _snapshot(m, 2.0))
    assert iv.tiers["memory"].hit_ratio is None
    assert iv.fuse_ops_per_s == 0


def test_counters_of_a_restarted_mount_count_from_zero() -> None:
    old = Metrics()
    _workload(old, scale=3)
    new = Metrics()
    _workload(new)
    iv = Interval.between(_snapshot(old, 1.0, pid=1), _snapshot(new, 2.0, pid=2))
    assert iv.fuse_bytes["read"] == 10 * MiB
    assert iv.tiers["memory"].hits == 7
    # The same pid but counters that went back (cannot happen, but must not go negative):
    iv = Interval.between(_snapshot(old, 1.0), _snapshot(new, 2.0))
    assert iv.fuse_bytes["read"] == 10 * MiB
    assert iv.fuse_latency["read"].count == 10


def test_the_write_back_backlog_is_read_and_shown() -> None:
    m = Metrics()
    m.writeback_files.set(3)
    m.writeback_bytes.set(5 * MiB)
    m.writeback_oldest_age.set(42)
    m.writeback_uploads.labels("error").inc(2)
    m.writeback_uploads.labels("ok").inc(7)
    m.writeback_uploaded_bytes.inc(MiB)
    snap = _snapshot(m, 0.0, write_mode="back")
    doc = snapshot_json(snap)["writeback"]
    assert doc == {
        "pending_files": 3, "pending_bytes": 5 * MiB, "oldest_age_seconds": 42.0,
        "overdue_files": 0, "uploaded_bytes": MiB, "failed_uploads": 2,
    }  # fmt: skip
    lines = render(snap, Interval.between(snap, snap))
    assert any(
        line.startswith("Write-back back: pending 3 files 5.0 MiB, oldest 42 s") for line in lines
    )


# -- --json ----------------------------------------------------------------------------


def test_the_json_snapshot_shape() -> None:
    m = Metrics()
    _workload(m)
    m.ufs_errors.labels("get").inc()
    m.fuse_errors.labels("lookup", "ENOENT").inc(2)
    doc = json.loads(json.dumps(snapshot_json(_snapshot(m, 0.0))))
    assert set(doc) == {
        "mount", "tiers", "fuse", "ufs", "prefetch", "writeback", "jobs", "finished_jobs",
        "group", "gateway", "tree_detached_seconds", "tree_journaled_changes",
    }  # fmt: skip
    assert doc["mount"] == FACTS
    assert doc["tree_detached_seconds"] == 0.0
    assert doc["tiers"]["memory"] == {
        "hits": 7,
        "misses": 3,
        "hit_ratio": pytest.approx(0.7),
        "hit_bytes": 28 * MiB,
        "miss_bytes": 12 * MiB,
        "bytes": 64 * MiB,
        "blocks": 16,
        "capacity_bytes": 256 * MiB,
        "fill_ratio": 0.25,
        "evictions": 0,
    }
    assert doc["tiers"]["disk"]["hit_ratio"] == 0.0
    assert doc["fuse"]["ops"] == {"lookup": 2, "open": 1, "read": 10}
    assert doc["fuse"]["ops_total"] == 13
    assert doc["fuse"]["bytes"] == {"read": 10 * MiB, "write": 0}
    assert doc["fuse"]["errors"] == {"lookup": 2}
    assert doc["fuse"]["errors_total"] == 2
    read = doc["fuse"]["latency"]["read"]
    assert set(read) == {"count", "mean_seconds", "p50_seconds", "p99_seconds"}
    assert read["count"] == 10
    assert 0.0001 < read["p50_seconds"] <= 0.0005
    assert 0.1 < read["p99_seconds"] <= 0.5
    assert doc["ufs"] == {
        "requests": {"get": 3},
        "requests_total": 3,
        "bytes": {"read": 12 * MiB},
        "bytes_total": 12 * MiB,
        "errors": {"get": 1},
        "errors_total": 1,
        "latency": {"get": doc["ufs"]["latency"]["get"]},
    }
    assert doc["ufs"]["latency"]["get"]["count"] == 1
    assert doc["prefetch"] == {"bytes": 8 * MiB, "used_bytes": 4 * MiB, "wasted_bytes": 0}


# -- the live view ---------------------------------------------------------------------


def _two_snapshots() -> tuple[Snapshot, Snapshot]:
    m = Metrics()
    _workload(m)
    first = _snapshot(m, 10.0)
    _workload(m)
    return first, _snapshot(m, 12.0)


def test_render_shows_the_mount_rates_tiers_and_latencies() -> None:
    first, second = _two_snapshots()
    lines = render(second, Interval.between(first, second))
    assert "" not in lines  # a blank line separates refreshes when not on a terminal
    text = "\n".join(lines)
    assert lines[0] == ("CloudFS /mnt/data <- s3://bucket  pid 4242  policy tinylfu  block 4.0 MiB")
    assert lines[1] == "Rates over the last 2.0 s, other numbers since mount"
    assert lines[2] == (
        "FUSE      read 5.0 MiB/s  write 0.0 MiB/s  ops 6/s  errors 0 (0 since mount)"
    )
    assert lines[3] == "UFS       read 6.0 MiB/s  requests 1.5/s  errors 0 (0 since mount)"
    assert lines[4] == "Prefetch  4.0 MiB/s  (fetched 16.0 MiB, used 8.0 MiB, wasted 0 B)"
    assert lines[6] == "Opens     ?"  # the mount says whether the kernel skips them
    cache = lines.index(next(line for line in lines if line.startswith("Cache")))
    assert lines[cache].split() == [
        "Cache", "hit", "now", "hit", "all", "hits", "misses", "hit", "bytes", "miss", "bytes",
        "evict",
    ]  # fmt: skip
    assert lines[cache + 1].split() == [
        "memory", "70.0%", "70.0%", "14", "6", "56.0", "MiB", "24.0", "MiB", "0",
    ]  # fmt: skip
    assert lines[cache + 2].split()[:3] == ["disk", "0.0%", "0.0%"]
    assert lines[cache + 3].split() == ["Fill", "held", "capacity", "used", "blocks"]
    assert lines[cache + 4].split() == ["memory", "64.0", "MiB", "256.0", "MiB", "25.0%", "16"]
    assert lines[cache + 5].split() == ["disk", "12.0", "MiB", "10.0", "GiB", "0.1%", "3"]
    latency = lines.index(next(line for line in lines if line.startswith("Latency")))
    assert lines[latency].split() == ["Latency", "ops/s", "mean", "p50", "p99", "count"]
    rows = [line.split()[0] for line in lines[latency + 1 : -1]]
    assert rows == ["read", "lookup", "open"]  # by count since mount
    read = lines[latency + 1].split()
    assert read[1] == "5"  # 10 reads in the last 2 s
    assert read[2:4] == ["20.3", "ms"]  # the interval's mean
    assert read[-1] == "20"
    assert "MiB/s" in text


def test_a_detached_mount_says_so_under_its_first_line() -> None:
    m = Metrics()
    _workload(m)
    m.tree_detached.set(95)
    m.tree_journaled.set(7)
    snap = _snapshot(m, 10.0)
    lines = render(snap, Interval.between(snap, snap))
    assert lines[1] == (
        "DETACHED  the tree service is unreachable (95 s): reads answered from what this "
        "mount knows, changes fail with EIO (write-back: journaled)"
    )
    assert lines[2].startswith("JOURNALED 7 tree change(s) made while detached")
    assert snapshot_json(snap)["tree_detached_seconds"] == 95
    assert snapshot_json(snap)["tree_journaled_changes"] == 7


def test_render_keeps_the_top_ops_and_copes_with_an_idle_mount() -> None:
    first, second = _two_snapshots()
    lines = render(second, Interval.between(first, second), top=1)
    latency = lines.index(next(line for line in lines if line.startswith("Latency")))
    assert len(lines) == latency + 3  # the header, one op, no jobs
    empty = _snapshot(Metrics(), 0.0)
    lines = render(empty, Interval.between(empty, empty))
    assert lines[-2] == "Latency   (no FUSE requests yet)"
    assert lines[-1] == "Jobs      (none announced: see cloudfs.hints)"
    assert lines[3].startswith("UFS       0.0 MiB/s")


def test_jobs_show_while_they_live_and_apart_once_finished() -> None:
    m = Metrics()
    job = JobTelemetry(m, "resnet", 1)
    job.announced(epoch=2, files=100, cached_bytes=30, total_bytes=120)
    for _ in range(4):
        job.file_read()
    job.read(nbytes=60, held=True, waited=0.0, fetched_ahead=False)
    job.read(nbytes=30, held=True, waited=0.0, fetched_ahead=True)
    job.read(nbytes=10, held=False, waited=0.25, fetched_ahead=False)
    job.position(4, lead=12)
    snap = _snapshot(m, 0.0)
    (row,) = snapshot_json(snap)["jobs"]
    assert row["job"] == "resnet" and row["rank"] == 1 and row["epoch"] == 2
    assert row["read_files"] == 4 and row["read_bytes"] == 100
    assert row["hit_ratio"] == pytest.approx(0.6)
    assert row["prefetch_hit_ratio"] == pytest.approx(0.3)
    assert row["stall_seconds"] == pytest.approx(0.25)
    assert row["next_epoch_cached_ratio"] == pytest.approx(0.25)
    assert row["position"] == 4 and row["order_files"] == 100 and row["prefetch_lead_files"] == 12
    line = render(snap, Interval.between(snap, snap))[-1].split()
    assert line[:3] == ["resnet[1]", "2", "4/100"]
    assert line[3:6] == ["60.0%", "30.0%", "250.0"]
    assert row["finished"] is False

    job.finish()  # the job ended: its final figures move to the finished jobs
    snap = _snapshot(m, 1.0)
    doc = snapshot_json(snap)
    assert doc["jobs"] == []
    assert doc["finished_jobs"] == [{**row, "finished": True}]
    lines = render(snap, Interval.between(snap, snap))
    assert lines[-3] == "Jobs      (none running: see cloudfs.hints)"
    assert lines[-2].split()[0] == "Finished"
    assert lines[-1].split()[:3] == ["resnet[1]", "2", "4/100"]

    job.announced(epoch=3, files=100, cached_bytes=30, total_bytes=120)  # back within the grace
    doc = snapshot_json(_snapshot(m, 2.0))
    assert [r["epoch"] for r in doc["jobs"]] == [3] and doc["finished_jobs"] == []
    assert doc["jobs"][0]["read_bytes"] == 100, "its counters run on"

    job.remove()  # the grace is over: its rows go
    doc = snapshot_json(_snapshot(m, 3.0))
    assert doc["jobs"] == [] and doc["finished_jobs"] == []


def test_the_cache_group_shows_each_member_as_the_ring_holds_it() -> None:
    m = Metrics()
    m.peer_members_view = lambda: [("10.0.0.1:7080", True), ("10.0.0.2:7080", False)]
    m.peer_requests.labels("10.0.0.1:7080", "hit").inc(3)
    m.peer_requests.labels("10.0.0.1:7080", "miss").inc(1)
    m.peer_bytes.labels("10.0.0.1:7080").inc(4 * MiB)
    m.peer_latency.labels("10.0.0.1:7080").observe(0.004)
    m.peer_latency.labels("10.0.0.1:7080").observe(0.002)
    m.peer_requests.labels("10.0.0.2:7080", "error").inc(2)
    m.peer_backoffs.labels("10.0.0.2:7080").inc()
    m.peer_requests.labels("10.0.0.9:7080", "hit").inc(5)  # left the group since
    snap = _snapshot(m, 0.0)
    first, second, gone = snapshot_json(snap)["group"]
    assert first == {
        "member": "10.0.0.1:7080", "in_ring": True, "up": True, "hits": 3, "misses": 1,
        "errors": 0, "bytes": 4 * MiB, "mean_latency_seconds": pytest.approx(0.003),
        "backoffs": 0,
    }  # fmt: skip
    assert (second["member"], second["up"], second["errors"], second["backoffs"]) == (
        "10.0.0.2:7080", False, 2, 1,
    )  # fmt: skip
    assert (gone["member"], gone["in_ring"], gone["hits"]) == ("10.0.0.9:7080", False, 5)
    lines = render(snap, Interval.between(snap, snap))
    table = lines[lines.index(next(x for x in lines if x.startswith("Group"))) :]
    assert table[1].split()[:3] == ["10.0.0.1:7080", "up", "75.0%"]
    assert table[2].split()[:3] == ["10.0.0.2:7080", "left", "out"]
    assert table[3].split()[:2] == ["10.0.0.9:7080", "gone"]


def test_a_mount_in_no_group_has_no_group_rows() -> None:
    snap = _snapshot(Metrics(), 0.0)
    assert snapshot_json(snap)["group"] == []
    assert not any(x.startswith("Group") for x in render(snap, Interval.between(snap, snap)))


# -- the command, with the control channel faked --------------------------------------


class _FakeMount:
    """Answers ``metrics`` like a mount whose read counter grows 1 MiB a call."""

    def __init__(self) -> None:
        self.metrics = Metrics()
        self.calls = 0

    def result(self, mountpoint: str, request: dict[str, Any], *, timeout: float) -> Any:
        assert request == {"op": "metrics"}
        self.calls += 1
        self.metrics.fuse_bytes.labels("read").inc(MiB)
        self.metrics.fuse_ops.labels("read").inc()
        text = generate_latest(self.metrics.registry).decode()
        return {"done": True, "text": text, **FACTS}


@pytest.fixture
def fake_mount(monkeypatch: pytest.MonkeyPatch) -> _FakeMount:
    fake = _FakeMount()
    monkeypatch.setattr(client, "result", fake.result)
    monkeypatch.setattr(client, "mountpoint_of", lambda path: "/mnt/data")
    return fake


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_live_without_a_terminal_prints_blocks_separated_by_a_blank_line(
    fake_mount: _FakeMount,
) -> None:
    out = io.StringIO()
    stats.live("/mnt/data", 0.01, 3, out)
    blocks = out.getvalue().rstrip("\n").split("\n\n")
    assert len(blocks) == 3
    assert all(b.startswith("CloudFS /mnt/data <- s3://bucket") for b in blocks)
    assert fake_mount.calls == 4  # a baseline, then one per refresh
    assert "\x1b" not in out.getvalue()


def test_live_on_a_terminal_redraws_in_place(fake_mount: _FakeMount) -> None:
    out = _Terminal()
    stats.live("/mnt/data", 0.01, 2, out)
    text = out.getvalue()
    assert text.startswith(stats.HOME + stats.CLEAR_SCREEN)
    assert text.count(stats.HOME) == 3  # the first clear, then two redraws
    assert text.endswith(stats.CLEAR_BELOW)
    assert "\n\n" not in text


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["stats", *argv])


def test_json_prints_one_snapshot(
    fake_mount: _FakeMount, capsys: pytest.CaptureFixture[str]
) -> None:
    assert stats.run(_args("/mnt/data/sub", "--json")) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mount"]["mountpoint"] == "/mnt/data"
    assert doc["fuse"]["bytes"]["read"] == MiB
    assert fake_mount.calls == 1


def test_ctrl_c_ends_the_view_with_status_0(
    fake_mount: _FakeMount, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(stats, "live", interrupted)
    assert stats.run(_args("/mnt/data")) == 0


@pytest.mark.parametrize("interval", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_interval_is_a_usage_error(interval: str) -> None:
    with pytest.raises(UsageError):
        stats.run(_args("/mnt/data", f"--interval={interval}"))


def test_a_bad_count_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        stats.run(_args("/mnt/data", "--count", "0"))


def test_errors_become_one_line_and_an_exit_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stats", "/", "--interval", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1

    def silent(mountpoint: str, request: dict[str, Any], *, timeout: float) -> Any:
        raise StartupError(f"{mountpoint}: the mount process does not answer")

    monkeypatch.setattr(client, "mountpoint_of", lambda path: "/mnt/data")
    monkeypatch.setattr(client, "result", silent)
    assert main(["stats", "/mnt/data", "--json"]) == 1
    err = capsys.readouterr().err
    assert err == "cloudfs: /mnt/data: the mount process does not answer\n"


def test_an_answer_without_metrics_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "result", lambda *a, **k: {"done": True})
    with pytest.raises(StartupError):
        stats.fetch("/mnt/data")
