"""The live view of ``cloudfs stats``: a snapshot and an interval -> the lines to draw.

Nothing here does I/O. ``render`` turns a ``Snapshot`` and the ``Interval``
since the previous one (``stats_model.py``) into the lines of one refresh;
``table`` aligns rows of cells in columns (``stats_scheduler.py`` uses it too).
"""

from __future__ import annotations

from collections.abc import Iterable

from cloudfs.cli.stats_gateway import rows as gateway_rows
from cloudfs.cli.stats_group import rows as group_rows
from cloudfs.cli.stats_jobs import finished as finished_jobs
from cloudfs.cli.stats_jobs import rows as job_rows
from cloudfs.cli.stats_jobs import running as running_jobs
from cloudfs.cli.stats_model import EMPTY_HISTOGRAM, Interval, Snapshot, ratio
from cloudfs.sizes import format_size

MiB = 1024 * 1024
TOP_OPS = 8  # latency rows in the live view
NO_JOBS = "Jobs      (none announced: see cloudfs.hints)"


def format_percent(value: float | None) -> str:
    return "-" if value is None else f"{100.0 * value:.1f}%"


def format_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1e-3:
        return f"{value * 1e6:.0f} us"
    if value < 1.0:
        return f"{value * 1e3:.1f} ms"
    return f"{value:.2f} s"


def format_mib_rate(bytes_per_s: float) -> str:
    return f"{bytes_per_s / MiB:.1f} MiB/s"


def format_count(value: float) -> str:
    """12 -> '12', 12345 -> '12.3k', 1.2e7 -> '12.0M'."""
    if value < 10_000:
        return f"{value:.0f}"
    if value < 10_000_000:
        return f"{value / 1e3:.1f}k"
    return f"{value / 1e6:.1f}M"


def table(rows: Iterable[Iterable[str]], *, left: int = 1) -> list[str]:
    """Rows of cells aligned in columns: the first ``left`` left-aligned, the others
    right-aligned."""
    grid = [list(r) for r in rows]
    if not grid:
        return []
    widths = [max(len(r[i]) for r in grid) for i in range(len(grid[0]))]
    lines = []
    for row in grid:
        cells = [c.ljust(w) for c, w in zip(row[:left], widths[:left], strict=True)]
        cells += [c.rjust(w) for c, w in zip(row[left:], widths[left:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    return lines


def render(snap: Snapshot, interval: Interval, *, top: int = TOP_OPS) -> list[str]:
    """The lines of one refresh of the live view; no blank line among them.

    Rates and "hit now" are over ``interval`` (since the previous refresh), the
    other numbers since mount; latency rows are the ``top`` FUSE ops by count.
    """
    f = snap.facts
    rate = interval.rate
    mount = "endpoint" not in f  # else a process without a mount (stats_source.py)
    lines = _mount_lines(snap, interval) if mount else _endpoint_lines(snap, interval)
    hits = [["Cache", "hit now", "hit all", "hits", "misses", "hit bytes", "miss bytes", "evict"]]
    fills = [["Fill", "held", "capacity", "used", "blocks"]]
    for name, t in snap.tiers.items():
        now = interval.tiers.get(name)
        hits.append(
            [
                f"  {name}",
                format_percent(now.hit_ratio if now else None),
                format_percent(t.hit_ratio),
                format_count(t.hits),
                format_count(t.misses),
                format_size(t.hit_bytes),
                format_size(t.miss_bytes),
                format_count(t.evictions),
            ]
        )
        capacity = snap.capacity(name)
        fills.append(
            [
                f"  {name}",
                format_size(t.bytes),
                format_size(capacity) if capacity else "-",
                format_percent(ratio(t.bytes, capacity or 0)),
                format_count(t.blocks),
            ]
        )
    lines += table(hits) + table(fills)
    ops = sorted(snap.fuse_latency.items(), key=lambda kv: (-kv[1].count, kv[0]))[:top]
    latency = [["Latency", "ops/s", "mean", "p50", "p99", "count"]]
    for op, h in ops:
        now_h = interval.fuse_latency.get(op, EMPTY_HISTOGRAM)
        latency.append(
            [
                f"  {op}",
                f"{rate(now_h.count):.0f}",
                format_seconds(now_h.mean),
                format_seconds(h.quantile(0.5)),
                format_seconds(h.quantile(0.99)),
                format_count(h.count),
            ]
        )
    if mount:
        lines += table(latency) if ops else ["Latency   (no FUSE requests yet)"]
    if snap.gateway:
        lines += table(gateway_rows(snap.gateway, format_seconds, format_size))
    if snap.group:
        lines += table(group_rows(snap.group, format_percent, format_seconds, format_size))
    live, ended = running_jobs(snap.jobs), finished_jobs(snap.jobs)
    if live:
        lines += table(job_rows(live, format_percent, format_seconds, format_size))
    elif mount:
        lines.append("Jobs      (none running: see cloudfs.hints)" if ended else NO_JOBS)
    if ended:
        lines += table(job_rows(ended, format_percent, format_seconds, format_size, "Finished"))
    return lines


def _ufs_line(snap: Snapshot, interval: Interval, since: str = "mount") -> str:
    ufs_rates = "  ".join(
        f"{d} {format_mib_rate(interval.rate(n))}" for d, n in sorted(interval.ufs_bytes.items())
    )
    return (
        f"UFS       {ufs_rates or format_mib_rate(0.0)}"
        f"  requests {interval.ufs_requests_per_s:.1f}/s"
        f"  errors {format_count(interval.ufs_errors)}"
        f" ({format_count(sum(snap.ufs_errors.values()))} since {since})"
    )


def _endpoint_lines(snap: Snapshot, interval: Interval) -> list[str]:
    """The head of the view of a process without a mount: what it fetched from the UFS."""
    return [
        f"CloudFS {snap.facts['endpoint']}",
        f"Rates over the last {interval.seconds:.1f} s, other numbers since the process started",
        _ufs_line(snap, interval, "start"),
    ]


def _mount_lines(snap: Snapshot, interval: Interval) -> list[str]:
    """The head of a mount's view: the mount, FUSE, UFS, prefetch and write-back."""
    f = snap.facts
    rate = interval.rate
    lines = [
        f"CloudFS {f.get('mountpoint', '?')} <- {f.get('ufs', '?')}  pid {f.get('pid', '?')}"
        f"  policy {f.get('cache_policy', '?')}"
        f"  block {format_size(float(f.get('block_size', 0) or 0))}",
        f"Rates over the last {interval.seconds:.1f} s, other numbers since mount",
        f"FUSE      read {format_mib_rate(interval.fuse_bytes_per_s('read'))}"
        f"  write {format_mib_rate(interval.fuse_bytes_per_s('write'))}"
        f"  ops {interval.fuse_ops_per_s:.0f}/s"
        f"  errors {format_count(interval.fuse_errors)}"
        f" ({format_count(sum(snap.fuse_errors.values()))} since mount)",
        _ufs_line(snap, interval),
        f"Prefetch  {format_mib_rate(rate(interval.prefetch_bytes))}"
        f"  (fetched {format_size(snap.prefetch_bytes)}"
        f", used {format_size(snap.prefetch_used_bytes)}"
        f", wasted {format_size(snap.prefetch_wasted_bytes)})",
        f"Write-back {f.get('write_mode', '?')}: pending {format_count(snap.writeback.files)} files"
        f" {format_size(snap.writeback.bytes)}"
        f", oldest {snap.writeback.oldest_age:.0f} s"
        f", overdue {format_count(snap.writeback.overdue)}"
        f"  (uploaded {format_size(snap.writeback.uploaded_bytes)}"
        f", failed attempts {format_count(snap.writeback.failures)})",
        f"Opens     {f.get('opens', '?')}",
    ]
    if snap.tree_detached_seconds > 0:
        lines.insert(
            1,
            f"DETACHED  the tree service is unreachable ({snap.tree_detached_seconds:.0f} s): "
            "reads answered from what this mount knows, changes fail with EIO"
            " (write-back: journaled)",
        )
    if snap.tree_journaled_changes > 0:
        lines.insert(
            2 if snap.tree_detached_seconds > 0 else 1,
            f"JOURNALED {snap.tree_journaled_changes:.0f} tree change(s) made while detached, "
            "replayed when the tree service is back",
        )
    return lines
