"""Medians and the markdown tables of the cold-cost benchmark (issue 26).

Rates and daemon CPU come from the timed passes; GIL-held time, and its share of the daemon's
CPU, from the sampled passes (py-spy running), where CPU and GIL time are of the same pass.
The per-node ceiling a GIL-held cost implies: one core's second divided by it (0.5 GIL-held
s per GiB -> 2 GiB/s; 2 GIL-held ms per file -> 500 files/s), the most one Python daemon
can serve however many cores the node has.
"""

from __future__ import annotations

import statistics
from typing import Any

GiB = 1 << 30
LABELS = {
    "cloudfs": "CloudFS read-write",
    "cloudfs-ro": "CloudFS `--read-only` (dataset mode)",
    "rclone": "rclone `mount --vfs-cache-mode full`",
    "s3fs": "s3fs `use_cache`",
}
PEAK_SLACK_MIB = 300  # the target: peak RSS within the memory cache + 300 MiB


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _ok(records: list[dict[str, Any]], system: str, kind: str) -> list[dict[str, Any]]:
    """The passes of ``system`` and ``kind`` that did not fail."""
    return [r for r in records if r["system"] == system and r["kind"] == kind and not r["error"]]


def _per_unit(r: dict[str, Any], key: str, kind: str) -> float | None:
    """``r[key]`` (seconds) per GiB for large passes, in ms per file for small ones."""
    value = r.get(key)
    if value is None:
        return None
    return float(value / (r["bytes"] / GiB) if kind == "large" else value / r["files"] * 1000)


def summarize(records: list[dict[str, Any]], systems: list[str]) -> dict[str, dict[str, Any]]:
    """Per system: medians over repeats of every figure in the tables."""
    out: dict[str, dict[str, Any]] = {}
    for system in systems:
        row: dict[str, Any] = {}
        for kind in ("large", "small"):
            timed = [r for r in _ok(records, system, kind) if r["timed"]]
            sampled = [r for r in _ok(records, system, kind) if r["sampled"]]
            rate = "mib_s" if kind == "large" else "files_s"
            row[f"{kind}_rate"] = _median([r[rate] for r in timed])
            row[f"{kind}_cpu"] = _median(
                [v for r in timed if (v := _per_unit(r, "cpu_s", kind)) is not None]
            )
            row[f"{kind}_origin_cpu"] = _median(
                [v for r in timed if (v := _per_unit(r, "origin_cpu_s", kind)) is not None]
            )
            row[f"{kind}_gil"] = _median(
                [v for r in sampled if (v := _per_unit(r, "gil_s", kind)) is not None]
            )
            row[f"{kind}_gil_share"] = _median(
                [
                    r["gil_s"] / r["cpu_s"]
                    for r in sampled
                    if r.get("gil_s") is not None and r["cpu_s"] > 0
                ]
            )
            row[f"{kind}_sys_share"] = _median(
                [
                    r["cpu_sys_s"] / r["cpu_s"]
                    for r in timed
                    if r.get("cpu_sys_s") and r["cpu_s"] > 0
                ]
            )
            row[f"{kind}_busy_cores"] = _median(
                [r["machine_busy_s"] / r["pass_wall_s"] for r in timed if "machine_busy_s" in r]
            )
            row[f"{kind}_sampled_rate"] = _median([r[rate] for r in sampled if not r["timed"]])
            peaks = [r["peak_mib"] for r in _ok(records, system, kind) if r.get("peak_mib")]
            row[f"{kind}_peak_mib"] = max(peaks) if peaks else None
            row[f"{kind}_n"] = len(timed)
        gil_gib, gil_file = row["large_gil"], row["small_gil"]
        row["ceiling_gib_s"] = 1 / gil_gib if gil_gib else None
        row["ceiling_files_s"] = 1000 / gil_file if gil_file else None
        row["errors"] = [
            f"{r['kind']} #{r['repeat']}: {r['error']}"
            for r in records
            if r["system"] == system and r["error"]
        ]
        out[system] = row
    return out


def _f(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def markdown(run: dict[str, Any]) -> str:
    """The report: the issue's table, the GIL share / ceiling / memory table, the origin row."""
    summary: dict[str, dict[str, Any]] = run["summary"]
    lines = [
        "| client | large cold MiB/s | daemon CPU s per GiB | GIL-held s per GiB "
        "| small cold files/s | daemon CPU ms per file | GIL-held ms per file |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for system, row in summary.items():
        lines.append(
            f"| {LABELS.get(system, system)} | {_f(row['large_rate'], ',.0f')} "
            f"| {_f(row['large_cpu'], '.2f')} | {_f(row['large_gil'], '.2f')} "
            f"| {_f(row['small_rate'], ',.0f')} | {_f(row['small_cpu'], '.2f')} "
            f"| {_f(row['small_gil'], '.2f')} |"
        )
    o = run.get("origin_results") or {}
    if o:
        lines.append(
            f"| origin: boto3 straight to {run['origin']} "
            f"| {_f(o.get('origin_get_stream'), ',.0f')} (1 GET stream); "
            f"{_f(o.get('origin_get_ranged8'), ',.0f')} (8 MiB ranges, 8 threads) "
            f"| - | - | {_f(o.get('origin_small_get16'), ',.0f')} objects/s (16 threads) | - | - |"
        )
    lines += [
        "",
        "GIL-held time is only measured for the Python daemons; n/a for the native ones. "
        "Columns after the first: large / small passes. The kernel's share is the daemon's "
        "system time over its CPU; machine busy cores: all CPU on the machine during a timed "
        "pass (the daemon's, the origin's, the reader's and any other work) over its wall time.",
        "",
        "| client | GIL share of daemon CPU, large / small | ceiling from the GIL: GiB/s "
        "| files/s | peak RSS MiB, large / small pass | sampled pass large MiB/s / small files/s "
        "| origin CPU s/GiB / ms per file | daemon CPU in the kernel | machine busy cores |",
        "|---|---|---:|---:|---|---|---|---|---|",
    ]
    for system, row in summary.items():
        share = _pair(row, "gil_share", ".0f", pct=True)
        lines.append(
            f"| {LABELS.get(system, system)} | {'n/a' if share == 'n/a / n/a' else share} "
            f"| {_f(row['ceiling_gib_s'], '.2f')} | {_f(row['ceiling_files_s'], ',.0f')} "
            f"| {_pair(row, 'peak_mib', ',.0f')} | {_pair(row, 'sampled_rate', ',.0f')} "
            f"| {_pair(row, 'origin_cpu', '.2f')} | {_pair(row, 'sys_share', '.0f', pct=True)} "
            f"| {_pair(row, 'busy_cores', '.1f')} |"
        )
    memory_cache = run.get("cloudfs_memory_cache_mib")
    if memory_cache:
        lines += [
            "",
            f"Peak RSS target for CloudFS: memory cache ({memory_cache:,} MiB) "
            f"+ {PEAK_SLACK_MIB} MiB = {memory_cache + PEAK_SLACK_MIB:,} MiB.",
        ]
    checks = run.get("gil_check") or []
    if checks:
        lines += ["", "py-spy GIL-held measure on known cases, this run:", ""]
        lines += ["| case | expected GIL-held s | measured |", "|---|---:|---:|"]
        lines += [f"| {c['case']} | {c['expected_gil_s']:.1f} | {c['gil_s']:.3f} |" for c in checks]
    errors = [f"- {s}: {e}" for s, row in summary.items() for e in row["errors"]]
    if errors:
        lines += ["", "Failed passes (left out of the medians):", "", *errors]
    return "\n".join(lines) + "\n"


def _pair(row: dict[str, Any], key: str, fmt: str, pct: bool = False) -> str:
    """ "large / small" of one figure (shares as percentages)."""
    cells = []
    for kind in ("large", "small"):
        value = row[f"{kind}_{key}"]
        if pct and value is not None:
            cells.append(f"{value * 100:{fmt}}%")
        else:
            cells.append(_f(value, fmt))
    return " / ".join(cells)


def _pct(share: float | None) -> float | None:
    return None if share is None else share * 100
