"""benchmarks/RESULTS-without-fuse.md from the raw JSON of ``benchmarks/without_fuse.py``.

Medians over repeats (min-max beside the rates), ratios against local disk's median of
the same pass and temperature. A hand-written block between ``<!-- HAND-WRITTEN -->`` and
``<!-- END HAND-WRITTEN -->`` in the existing report is kept.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from bench.nofusespec import PASSES, Pass

KEEP = re.compile(r"<!-- HAND-WRITTEN -->.*?<!-- END HAND-WRITTEN -->\n?", re.S)
LOCAL = "local"


def values(data: dict[str, Any], system: str, p: str, temp: str, field: str) -> list[float]:
    out = []
    for rep in data["repeats"]:
        got = rep.get("systems", {}).get(system, {}).get("passes", {}).get(p, {}).get(temp)
        if got is not None:
            out.append(float(got[field]))
    return out


def median(vals: list[float]) -> float | None:
    return statistics.median(vals) if vals else None


def fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def spread(vals: list[float], digits: int = 0) -> str:
    if not vals:
        return "-"
    if len(vals) == 1:
        return fmt(vals[0], digits)
    return f"{fmt(median(vals), digits)} ({fmt(min(vals), digits)}-{fmt(max(vals), digits)})"


def ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "-"
    return f"{value / base:.2f}x" if value / base < 10 else f"{value / base:.0f}x"


def rate_field(p: Pass) -> tuple[str, str]:
    return ("mib_s", "MiB/s") if p.phase == "large" else ("files_s", "files/s")


def requests(data: dict[str, Any], system: str, p: str, temp: str) -> str:
    gets, heads, other = [], [], []
    for rep in data["repeats"]:
        got = rep.get("systems", {}).get(system, {}).get("passes", {}).get(p, {}).get(temp)
        if got is None:
            continue
        counts = got["origin_requests"]
        gets.append(float(counts.get("GET", 0)))
        heads.append(float(counts.get("HEAD", 0)))
        other.append(float(sum(v for k, v in counts.items() if k not in ("GET", "HEAD"))))
    if not gets:
        return "-"
    text = f"{fmt(median(gets))} + {fmt(median(heads))}"
    return text + (f" + {fmt(median(other))}" if median(other) else "")


def pass_table(data: dict[str, Any], p: Pass) -> list[str]:
    field, unit = rate_field(p)
    systems = data["meta"]["systems"]
    base = {t: median(values(data, LOCAL, p.name, t, field)) for t in ("cold", "warm")}
    lines = [
        f"| system | cold {unit} | cold vs local | warm {unit} | warm vs local | warm / cold "
        "| origin sent cold (x data) | warm | origin GET + HEAD cold | warm | wrong files |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, info in systems.items():
        cold = values(data, name, p.name, "cold", field)
        warm = values(data, name, p.name, "warm", field)
        wrong = sum(values(data, name, p.name, "cold", "wrong_files")) + sum(
            values(data, name, p.name, "warm", "wrong_files")
        )
        lines.append(
            f"| {info['label']} | {spread(cold)} | {ratio(median(cold), base['cold'])} "
            f"| {spread(warm)} | {ratio(median(warm), base['warm'])} "
            f"| {ratio(median(warm), median(cold))} "
            f"| {fmt(median(values(data, name, p.name, 'cold', 'origin_multiple')), 2)} "
            f"| {fmt(median(values(data, name, p.name, 'warm', 'origin_multiple')), 2)} "
            f"| {requests(data, name, p.name, 'cold')} | {requests(data, name, p.name, 'warm')} "
            f"| {fmt(wrong) if cold or warm else '-'} |"
        )
    return lines


def new_process_table(data: dict[str, Any]) -> list[str]:
    """The ``cloudfs://`` systems' third pass: a new client process on the warm system."""
    lines = [
        "| pass | system | warm, same process | new process | new process vs local warm "
        "| origin sent, new process (x data) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for p in PASSES:
        field, unit = rate_field(p)
        local = median(values(data, LOCAL, p.name, "warm", field))
        for name, info in data["meta"]["systems"].items():
            fresh = values(data, name, p.name, "new-process", field)
            if not fresh:
                continue
            warm = values(data, name, p.name, "warm", field)
            origin = median(values(data, name, p.name, "new-process", "origin_multiple"))
            lines.append(
                f"| {p.name} ({unit}) | {info['label']} | {spread(warm)} | {spread(fresh)} "
                f"| {ratio(median(fresh), local)} "
                f"| {fmt(origin, 2)} |"
            )
    return lines if len(lines) > 2 else []


def load_line(data: dict[str, Any]) -> str:
    loads = [
        float(t["load_1min"])
        for rep in data["repeats"]
        for s in rep.get("systems", {}).values()
        for p in s.get("passes", {}).values()
        for t in p.values()
    ]
    if not loads:
        return "no pass ran"
    return (
        f"1-minute load average at the start of each pass: median {median(loads):.1f}, "
        f"{min(loads):.1f}-{max(loads):.1f} ({data['meta']['machine']['nproc']} CPUs)"
    )


def write(data: dict[str, Any], target: Path, json_path: Path) -> None:
    meta = data["meta"]
    m = meta["machine"]
    kept = ""
    if target.exists():
        found = KEEP.search(target.read_text())
        kept = found.group(0) if found else ""
    repeats = len(data["repeats"])
    lines = [
        "# Reading without FUSE: results",
        "",
        f"Generated by `benchmarks/without_fuse.py` (issue 16). Medians of {repeats} "
        "repeat(s), min-max in brackets; *vs local* = the median over local disk's median in "
        "the same pass and temperature. The origin's byte counts are deterministic (counted "
        "at the proxy); rates are not: the machine is shared and noisy, and only ratios "
        "within one run mean anything.",
        "",
        f"- **Command:** `{meta['command']}`",
        f"- **Date:** {m['date']}; wall time {meta.get('wall_seconds', 0) / 60:.0f} min "
        f"(data set written in {meta.get('populate_s', 0):.0f} s)",
        f"- **Machine:** {m['nproc']} CPUs ({m['cpu']}), {m['memory_gib']} GiB memory, Linux "
        f"{m['kernel']}, Python {m['python']}; {load_line(data)}",
        f"- **CloudFS:** commit {m['cloudfs_commit']}"
        f"{' (cloudfs/ modified)' if m.get('cloudfs_tree_dirty') else ''}; "
        f"{meta.get('s3fs_version', '?')} in its own venv",
        f"- **Origin:** moto in server mode on 127.0.0.1 behind a Python TCP proxy adding "
        f"{meta['delay_ms']:g} ms per request and counting every byte the origin answers "
        "(moto reads the whole object for every ranged GET). The tree service (`cloudfs meta "
        "serve`, one volume over the bucket, `meta_ttl` 3600 s) lists straight from moto, "
        f"once before the first pass ({meta.get('listed_files', '?')} entries).",
        f"- **Data set:** {meta['workload_text']}; random bytes; the same bytes in a local "
        "directory for local disk; every file's size and crc32 checked in every pass",
        f"- **Raw results:** `benchmarks/results/{json_path.name}`",
        "",
        "Each pass: a fresh system (new mount with an empty cache directory, new gateway "
        "process, new client process), `sync; echo 3 > /proc/sys/vm/drop_caches`, then "
        "cold = read every file of the phase, warm = at once again on the same system. "
        "*large-1*: the large files one after another; *large-4*: 4 at a time; *small-8*: "
        "the small files on 8 threads. *Origin sent* = every byte the origin answered at "
        "the proxy (GET bodies and headers, HEADs, LISTs) over the phase's data set.",
        "",
        "| system | how |",
        "|---|---|",
        *[f"| {s['label']} | {s['how']} |" for s in meta["systems"].values()],
        "",
    ]
    if meta.get("skipped"):
        lines += ["Not run:", ""]
        lines += [f"- {name}: {why}" for name, why in meta["skipped"].items()]
        lines += [""]
    if kept:
        lines += [kept.rstrip("\n"), ""]
    titles = {
        "large-1": "Large files, 1 reader",
        "large-4": "Large files, 4 readers",
        "small-8": "Small files, 8 threads",
    }
    for p in PASSES:
        lines += [f"## {titles[p.name]}", "", *pass_table(data, p), ""]
    fresh = new_process_table(data)
    if fresh:
        lines += [
            "## A new process on a warm system",
            "",
            "After the warm pass, the `cloudfs://` systems read every file again from a new "
            "client process (its in-process cache empty; the mount's or nothing else's "
            "warm): what a second training process or a forked DataLoader worker sees.",
            "",
            *fresh,
            "",
        ]
    errors = [
        f"- repeat {rep['index'] + 1}, {name}: {e}"
        for rep in data["repeats"]
        for name, s in rep.get("systems", {}).items()
        for e in s.get("errors", [])
    ]
    lines += ["## Errors", "", *(errors or ["None: every pass of every repeat completed."]), ""]
    target.write_text("\n".join(lines))
