"""The report of benchmarks/scheduling_sim.py as Markdown tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .report import METRICS

HEADERS = {
    "mean_jct_s": "mean JCT (s)",
    "p95_jct_s": "p95 JCT (s)",
    "makespan_s": "makespan (s)",
    "origin_gib": "origin (GiB)",
    "hit_ratio": "cache hit ratio",
    "mean_queue_s": "mean queued (s)",
}


def _cell(metric: str, value: float) -> str:
    return f"{value:.2f}" if metric == "hit_ratio" else f"{value:,.0f}"


def medians_table(report: Mapping[str, Any]) -> str:
    """One row per policy: each metric's median over the repeats."""
    lines = [
        "| policy | " + " | ".join(HEADERS[m] for m in METRICS) + " |",
        "|---|" + "---:|" * len(METRICS),
    ]
    for name, figures in report["medians"].items():
        lines.append(f"| {name} | " + " | ".join(_cell(m, figures[m]) for m in METRICS) + " |")
    return "\n".join(lines)


def ratios_table(report: Mapping[str, Any]) -> str:
    """One row per policy: policy / blind baseline per seed, median (min-max)."""
    shown = [m for m in METRICS if m != "mean_queue_s"]
    lines = [
        f"| policy / {report['args']['blind']} | " + " | ".join(HEADERS[m] for m in shown) + " |",
        "|---|" + "---:|" * len(shown),
    ]
    for name, ratios in report["ratios_vs_blind"].items():
        cells = [
            f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f})" if (r := ratios.get(m)) else "-"
            for m in shown
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
