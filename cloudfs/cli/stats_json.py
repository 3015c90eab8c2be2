"""``cloudfs stats --json``: one snapshot's since-mount numbers as a JSON object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cloudfs.cli.stats_jobs import finished, running
from cloudfs.cli.stats_model import Histogram, Snapshot, ratio


def _int(value: float) -> int:
    return round(value)


def _latency_json(hists: Mapping[str, Histogram]) -> dict[str, dict[str, Any]]:
    return {
        op: {
            "count": _int(h.count),
            "mean_seconds": h.mean,
            "p50_seconds": h.quantile(0.5),
            "p99_seconds": h.quantile(0.99),
        }
        for op, h in hists.items()
    }


def snapshot_json(snap: Snapshot) -> dict[str, Any]:
    """The ``--json`` object: the mount's facts and the since-mount numbers."""
    tiers: dict[str, dict[str, Any]] = {}
    for name, t in snap.tiers.items():
        capacity = snap.capacity(name)
        tiers[name] = {
            "hits": _int(t.hits),
            "misses": _int(t.misses),
            "hit_ratio": t.hit_ratio,
            "hit_bytes": _int(t.hit_bytes),
            "miss_bytes": _int(t.miss_bytes),
            "bytes": _int(t.bytes),
            "blocks": _int(t.blocks),
            "capacity_bytes": capacity,
            "fill_ratio": ratio(t.bytes, capacity or 0),
            "evictions": _int(t.evictions),
        }
    return {
        "mount": dict(snap.facts),
        "tree_detached_seconds": snap.tree_detached_seconds,
        "tree_journaled_changes": snap.tree_journaled_changes,
        "tiers": tiers,
        "fuse": {
            "ops": {op: _int(n) for op, n in sorted(snap.fuse_ops.items())},
            "ops_total": _int(sum(snap.fuse_ops.values())),
            "bytes": {
                "read": _int(snap.fuse_bytes.get("read", 0.0)),
                "write": _int(snap.fuse_bytes.get("write", 0.0)),
                **{d: _int(n) for d, n in snap.fuse_bytes.items()},
            },
            "errors": {op: _int(n) for op, n in sorted(snap.fuse_errors.items())},
            "errors_total": _int(sum(snap.fuse_errors.values())),
            "latency": _latency_json(snap.fuse_latency),
            "answered_in_c": {op: _int(n) for op, n in sorted(snap.fuse_answered_in_c.items())},
            "loop_wakeups": _int(snap.fuse_loop_wakeups),
        },
        "ufs": {
            "requests": {op: _int(n) for op, n in sorted(snap.ufs_requests.items())},
            "requests_total": _int(sum(snap.ufs_requests.values())),
            "bytes": {d: _int(n) for d, n in sorted(snap.ufs_bytes.items())},
            "bytes_total": _int(sum(snap.ufs_bytes.values())),
            "errors": {op: _int(n) for op, n in sorted(snap.ufs_errors.items())},
            "errors_total": _int(sum(snap.ufs_errors.values())),
            "latency": _latency_json(snap.ufs_latency),
        },
        "prefetch": {
            "bytes": _int(snap.prefetch_bytes),
            "used_bytes": _int(snap.prefetch_used_bytes),
            "wasted_bytes": _int(snap.prefetch_wasted_bytes),
        },
        "writeback": {
            "pending_files": _int(snap.writeback.files),
            "pending_bytes": _int(snap.writeback.bytes),
            "oldest_age_seconds": snap.writeback.oldest_age,
            "overdue_files": _int(snap.writeback.overdue),
            "uploaded_bytes": _int(snap.writeback.uploaded_bytes),
            "failed_uploads": _int(snap.writeback.failures),
        },
        "jobs": [job.to_json() for job in running(snap.jobs)],
        "finished_jobs": [job.to_json() for job in finished(snap.jobs)],
        "group": [member.to_json() for member in snap.group],
        "gateway": [op.to_json() for op in snap.gateway],
    }
