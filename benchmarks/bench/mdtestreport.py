"""The raw JSON of ``benchmarks/mdtest.py`` into RESULTS-mdtest.md, with issue 27's targets.

Regenerated whole, except the part between the HAND-WRITTEN markers, which is kept
(``writereport.hand_written``). The raw JSON: ``meta`` (command, machine, options),
``fuse`` (config -> file size -> clients -> phase -> ops/s, medians of the repeats) and
``api`` (config -> clients -> operation -> ops_s / p50_ms / p99_ms, medians).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.mdtestapi import API_LABELS, API_PHASES
from bench.report import display_path, num
from bench.writereport import hand_written

BEGIN = "<!-- BEGIN HAND-WRITTEN: what the numbers mean -->"
PHASES = ("create", "stat", "readdir", "rename", "unlink")
FUSE_CONFIGS = ("embedded-lmdb", "grpc-lmdb", "grpc-etcd", "grpc-etcd-2")
CONFIG_TEXT = {
    "embedded-lmdb": "the embedded LMDB tree of a plain mount",
    "grpc-lmdb": "the tree service over LMDB (a `grpc://` mount)",
    "grpc-etcd": "the tree service over a 3-member etcd",
    "grpc-etcd-2": "two tree servers over one 3-member etcd, two mounts of the volume "
    "(one through each), the clients split between them",
}
# the runs that were "today's" rates for issue 27 (stat and readdir must not fall below)
BASELINE = (
    "benchmarks/results/mdtest-20261204-0517.json",  # tree service, commit fd052d1
    "benchmarks/results/mdtest-20261204-0405.json",  # embedded-lmdb, commit 3143393
)
Rates = dict[str, dict[str, float]]  # clients -> phase -> ops/s


@dataclass(frozen=True)
class Verdict:
    target: str
    measured: str
    required: str
    met: bool | None  # None: not measured in this run


def load_baseline(paths: list[Path]) -> dict[str, Rates]:
    """Empty-file rates per config from earlier runs' JSON (the old flat format, or this
    one's ``fuse`` at size 0); the first file that has a config gives it."""
    base: dict[str, Rates] = {}
    for path in paths:
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        if "fuse" in data:
            data = {c: sizes.get("0", {}) for c, sizes in data["fuse"].items()}
        for config, rates in data.items():
            base.setdefault(config, rates)
    return base


def _rate(data: dict[str, Any], config: str, size: str, clients: str, phase: str) -> float | None:
    value = data.get("fuse", {}).get(config, {}).get(size, {}).get(clients, {}).get(phase)
    return None if value is None else float(value)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _size_text(size: str) -> str:
    n = int(size)
    if n == 0:
        return "empty files"
    return f"{n // 1024} KiB files" if n % 1024 == 0 else f"{n:,} B files"


def _most_clients(data: dict[str, Any]) -> str:
    counts = [int(c) for c in data["meta"].get("procs", [8])]
    return str(8 if 8 in counts else max(counts))


def verdicts(data: dict[str, Any], baseline: dict[str, Rates]) -> list[Verdict]:
    out: list[Verdict] = []
    n = _most_clients(data)
    sizes = [str(s) for s in data["meta"].get("sizes", [0])]
    for size in sizes:
        for phase in ("create", "rename", "unlink"):
            etcd = _rate(data, "grpc-etcd", size, n, phase)
            embedded = _rate(data, "embedded-lmdb", size, n, phase)
            r = _ratio(etcd, embedded)
            out.append(
                Verdict(
                    f"{phase}s over etcd ÷ embedded LMDB, {n} clients, {_size_text(size)}",
                    _x(r, f"{num(etcd)} / {num(embedded)} per s"),
                    "≥ 0.6x",
                    None if r is None else r >= 0.6,
                )
            )
        two = _rate(data, "grpc-etcd-2", size, n, "create")
        one = _rate(data, "grpc-etcd", size, n, "create")
        r = _ratio(two, one)
        out.append(
            Verdict(
                f"creates, 2 tree servers ÷ 1 over one etcd, {n} clients, {_size_text(size)}",
                _x(r, f"{num(two)} / {num(one)} per s"),
                "≥ 1.3x",
                None if r is None else r >= 1.3,
            )
        )
    for phase in ("create_open", "create"):
        row = data.get("api", {}).get("api-etcd", {}).get("1", {}).get(phase)
        p50 = None if row is None else float(row["p50_ms"])
        out.append(
            Verdict(
                f"median latency at the tree-service API over etcd, 1 client: {API_LABELS[phase]}",
                "-" if p50 is None else f"{p50:.2f} ms",
                "≤ 3 ms",
                None if p50 is None else p50 <= 3.0,
            )
        )
    for config in FUSE_CONFIGS:
        for clients, rates in sorted(baseline.get(config, {}).items(), key=lambda kv: int(kv[0])):
            for phase in ("stat", "readdir"):
                now = _rate(data, config, "0", clients, phase)
                if now is None:
                    continue
                r = _ratio(now, rates.get(phase))
                out.append(
                    Verdict(
                        f"{phase} rate vs. before, {config}, {clients} client"
                        f"{'s' if clients != '1' else ''}, empty files",
                        _x(r, f"{num(now)} / {num(rates.get(phase))} per s"),
                        "≥ 1.0x",
                        None if r is None else r >= 1.0,
                    )
                )
    return out


def _x(ratio: float | None, detail: str) -> str:
    return "not measured" if ratio is None else f"{ratio:.2f}x ({detail})"


def header(data: dict[str, Any], json_path: Path) -> list[str]:
    meta = data["meta"]
    mach = meta.get("machine", {})
    dirty = " (cloudfs/ had uncommitted changes)" if mach.get("cloudfs_tree_dirty") else ""
    configs = [c for c in FUSE_CONFIGS if c in data.get("fuse", {})]
    return [
        "# CloudFS metadata: the embedded tree, the tree service over LMDB, and over etcd",
        "",
        "Generated by `benchmarks/mdtest.py` (issues 3 and 27). Through a real mount of a "
        "local directory (`--meta-ttl 60`), each client process creates "
        "(`open(O_CREAT|O_EXCL)`, a write of the file's size when not empty, `close`), "
        "stats, lists (`os.scandir` with a stat per entry), renames and unlinks its own "
        f"files, {meta.get('files')} in {meta.get('dirs')} directories of its own; ops/s "
        "are all processes' operations over the slowest process's time (readdir: entries/s); "
        f"medians of {meta.get('repeats')} repeat(s), each on fresh servers and mounts. "
        "Only ratios from one run mean much: the machine is shared and noisy.",
        "",
        f"- **Command:** `{meta.get('command', '?')}`",
        f"- **Date:** {mach.get('date', '?')}; wall time "
        f"{meta.get('wall_seconds', 0) / 60:.0f} min",
        f"- **Machine:** {mach.get('nproc', '?')} CPUs ({mach.get('cpu', '?')}), "
        f"{mach.get('memory_gib', '?')} GiB memory, Linux {mach.get('kernel', '?')}, "
        f"Python {mach.get('python', '?')}; one host runs everything: clients, FUSE "
        "daemons, tree servers and etcd",
        f"- **etcd:** {meta.get('etcd') or 'not installed'}; 3 members on loopback, data "
        "on local disk (`running_etcd(..., in_memory=False)`), as deployed",
        f"- **Code:** commit {mach.get('cloudfs_commit', '?')}{dirty}",
        "- **Trees:** " + "; ".join(f"`{c}`: {CONFIG_TEXT[c]}" for c in configs),
        f"- **Raw results:** `{display_path(json_path)}`",
        "",
    ]


def targets_section(vs: list[Verdict], baseline_paths: list[str]) -> list[str]:
    lines = [
        "## Targets (issue 27)",
        "",
        "Ratios within this run, except stat and readdir, which compare with the rates "
        f"before issue 27 ({', '.join(f'`{p}`' for p in baseline_paths)}).",
        "",
        "| target | measured | required | verdict |",
        "|---|---|---|---|",
    ]
    for v in vs:
        verdict = "not measured" if v.met is None else ("met" if v.met else "**missed**")
        lines.append(f"| {v.target} | {v.measured} | {v.required} | {verdict} |")
    return [*lines, ""]


def fuse_tables(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for size in [str(s) for s in data["meta"].get("sizes", [0])]:
        lines += [
            f"## Through FUSE: {_size_text(size)}",
            "",
            "| tree | clients | " + " | ".join(PHASES) + " |",
            "|---|---:|" + "---:|" * len(PHASES),
        ]
        for config in FUSE_CONFIGS:
            by_clients = data.get("fuse", {}).get(config, {}).get(size, {})
            for clients, rates in sorted(by_clients.items(), key=lambda kv: int(kv[0])):
                cells = " | ".join(num(rates.get(ph)) for ph in PHASES)
                lines.append(f"| {config} | {clients} | {cells} |")
        lines.append("")
    return lines


def api_table(data: dict[str, Any]) -> list[str]:
    api = data.get("api", {})
    if not api:
        return []
    lines = [
        "## The tree-service API alone (no FUSE)",
        "",
        f"Client processes, each with its own `GrpcMeta`, {data['meta'].get('api_ops')} "
        "files each in directories of their own, against one tree server "
        "(`benchmarks/bench/mdtestapi.py`); latency of each call (ms), ops/s of all "
        "clients together.",
        "",
        "| tree | clients | operation | ops/s | median ms | p99 ms |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for config, by_clients in api.items():
        for clients, ops in sorted(by_clients.items(), key=lambda kv: int(kv[0])):
            for phase in API_PHASES:
                row = ops.get(phase)
                if row is not None:
                    lines.append(
                        f"| {config} | {clients} | {API_LABELS[phase]} | {num(row['ops_s'])} | "
                        f"{row['p50_ms']:.2f} | {row['p99_ms']:.2f} |"
                    )
    return [*lines, ""]


def render(data: dict[str, Any], json_path: Path, previous: str | None) -> str:
    paths = data["meta"].get("baseline", list(BASELINE))
    root = Path(__file__).resolve().parents[2]
    baseline = load_baseline([root / p for p in paths])
    lines = header(data, json_path)
    lines += hand_written(previous, BEGIN)
    lines += targets_section(verdicts(data, baseline), paths)
    lines += fuse_tables(data)
    lines += api_table(data)
    return "\n".join(lines).rstrip("\n") + "\n"


def write(data: dict[str, Any], path: Path, json_path: Path) -> None:
    previous = path.read_text() if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data, json_path, previous))
