"""benchmarks/RESULTS-cache-group.md from the raw JSON of ``benchmarks/cache_group.py``.

Medians over repeats (min-max beside the throughputs). A hand-written block between
``<!-- HAND-WRITTEN -->`` and ``<!-- END HAND-WRITTEN -->`` in the existing report is kept.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

MiB = 1 << 20
GiB = 1 << 30
KEEP = re.compile(r"<!-- HAND-WRITTEN -->.*?<!-- END HAND-WRITTEN -->\n?", re.S)


def _values(data: dict[str, Any], case: str, phase: str, field: str) -> list[float]:
    """``field`` of ``phase`` of ``case`` in every repeat that has it; ``origin_multiple``
    is every response byte at the proxy (GETs, LIST pages and HEADs) over the data set."""
    out = []
    for rep in data["repeats"]:
        got = rep.get("cases", {}).get(case, {}).get("phases", {}).get(phase)
        if got is None:
            continue
        if field == "origin_multiple":
            out.append(got["origin_all_bytes"] / got["bytes_per_mount"])
        else:
            out.append(float(got[field]))
    return out


def _med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _spread(values: list[float], digits: int = 0) -> str:
    if not values:
        return "-"
    med = _fmt(statistics.median(values), digits)
    if len(values) == 1:
        return med
    return f"{med} ({_fmt(min(values), digits)}-{_fmt(max(values), digits)})"


def _cases(data: dict[str, Any]) -> list[tuple[int, bool]]:
    nodes = data["meta"]["spec"]["nodes"]
    return [(n, g) for n in nodes for g in (False, True)]


def phase_table(data: dict[str, Any], phase: str) -> list[str]:
    rate = "MiB/s" if phase == "large" else "files/s"
    field = "mib_s" if phase == "large" else "files_s"
    lines = [
        f"| nodes | group | origin sent (x data set) | origin GETs + HEADs | aggregate {rate} "
        "| wall s | from peers (MiB) | peer errors | files read wrong |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, g in _cases(data):
        case = f"{n}-{'group' if g else 'alone'}"
        gets, heads = [], []
        for rep in data["repeats"]:
            got = rep.get("cases", {}).get(case, {}).get("phases", {}).get(phase)
            if got is not None:
                gets.append(float(got["origin_requests"].get("GET", 0)))
                heads.append(float(got["origin_requests"].get("HEAD", 0)))
        lines.append(
            f"| {n} | {'yes' if g else 'no'} "
            f"| {_fmt(_med(_values(data, case, phase, 'origin_multiple')), 3)} "
            f"| {_fmt(_med(gets))} + {_fmt(_med(heads))} "
            f"| {_spread(_values(data, case, phase, field))} "
            f"| {_fmt(_med(_values(data, case, phase, 'seconds')), 1)} "
            f"| {_fmt(_med([v / MiB for v in _values(data, case, phase, 'peer_bytes')]))} "
            f"| {_fmt(sum(_values(data, case, phase, 'peer_errors')))} "
            f"| {_fmt(sum(_values(data, case, phase, 'wrong_files')))} |"
        )
    return lines


def transfer_table(data: dict[str, Any]) -> list[str]:
    ts = [rep["transfer"] for rep in data["repeats"] if "transfer" in rep]
    if not ts:
        return ["(not measured)"]

    def col(name: str, scale: float = 1.0, digits: int = 1) -> str:
        return _spread([t[name] * scale for t in ts], digits)

    return [
        "| one 4 MiB block | median ms per call | MiB/s |",
        "|---|---:|---:|",
        f"| from a worker that holds it (one HTTP GET, loopback; served from "
        f"{', '.join(sorted(ts[0]['peer_source']))}) | {col('peer_s', 1000)} "
        f"| {col('peer_mib_s', digits=0)} |",
        f"| ranged GET from the origin through the {data['meta']['delay_ms']:g} ms proxy "
        f"| {col('origin_delayed_s', 1000)} | {col('origin_delayed_mib_s', digits=0)} |",
        f"| ranged GET straight to moto (no added delay) | {col('origin_direct_s', 1000)} "
        f"| {col('origin_direct_mib_s', digits=0)} |",
        f"| from a worker that does not hold it yet (it GETs it through the proxy) "
        f"| {col('worker_cold_s', 1000)} | - |",
        "",
        f"Peer vs origin: **{col('speedup_vs_delayed', digits=1)}x** faster than the delayed "
        f"origin, **{col('speedup_vs_direct', digits=1)}x** than moto with no delay. One "
        f"worker serving held blocks to {ts[0]['worker_threads']} callers at once: "
        f"**{col('worker_serving_mib_s', digits=0)} MiB/s**.",
    ]


def ring_table(data: dict[str, Any]) -> list[str]:
    lines = [
        "| members | `owner()` us per block | `ranked()` us per block | keys | moved when one "
        "joins (1/(N+1)) | busiest member / mean |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data.get("ring", []):
        lines.append(
            f"| {r['members']:,} | {r['owner_us']:,.1f} | {r['ranked_us']:,.1f} | {r['keys']:,} "
            f"| {r['moved_on_join']:.2%} ({r['expected_moved']:.2%}) "
            f"| {r['busiest_over_mean']:.2f} |"
        )
    return lines


def projection(data: dict[str, Any]) -> list[str]:
    """What 100 and 1,000 nodes would send to the origin, from the measured multiples.

    Alone: N times one node's multiple. Group: a straight line through the 1-node and the
    largest group case, a + b (N - 1): a is the blocks (once for the group), b what every
    mount still fetches itself (its listing of the bucket)."""
    nodes = data["meta"]["spec"]["nodes"]
    top = max(nodes)
    out = [
        "| nodes | phase | alone: origin sends (x data set) | group: origin sends "
        "| of which listings | 1 TiB data set, alone | 1 TiB data set, group |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for phase in ("large", "small"):
        alone = _med(_values(data, "1-alone", phase, "origin_multiple"))
        one = _med(_values(data, "1-group", phase, "origin_multiple"))
        many = _med(_values(data, f"{top}-group", phase, "origin_multiple"))
        if alone is None or one is None or many is None or top < 2:
            continue
        per_mount = (many - one) / (top - 1)
        for n in (100, 1000):
            group = one + per_mount * (n - 1)
            out.append(
                f"| {n:,} | {phase} | {n * alone:,.1f} | {group:,.3f} "
                f"| {per_mount * (n - 1):,.3f} | {n * alone:,.0f} TiB | {group:,.2f} TiB |"
            )
    return out


def write(data: dict[str, Any], target: Path, json_path: Path) -> None:
    meta = data["meta"]
    m = meta["machine"]
    kept = ""
    if target.exists():
        found = KEEP.search(target.read_text())
        kept = found.group(0) if found else ""
    repeats = len(data["repeats"])
    lines = [
        "# A cache group vs every node alone: results",
        "",
        f"Generated by `benchmarks/cache_group.py` (issue 14). Medians of {repeats} repeat(s), "
        "min-max in brackets. The origin's byte counts are deterministic (counted at the proxy "
        "in front of moto); throughputs are not: the machine is shared and noisy, and only "
        "ratios within one run mean anything.",
        "",
        f"- **Command:** `{meta['command']}`",
        f"- **Date:** {m['date']}; wall time {meta.get('wall_seconds', 0) / 60:.0f} min "
        f"(data set written in {meta.get('populate_s', 0):.0f} s)",
        f"- **Machine:** {m['nproc']} CPUs ({m['cpu']}), {m['memory_gib']} GiB memory, Linux "
        f"{m['kernel']}, Python {m['python']}",
        f"- **CloudFS:** commit {m['cloudfs_commit']}"
        f"{' (cloudfs/ modified)' if m.get('cloudfs_tree_dirty') else ''}; mounts "
        f"`--read-only --memory-cache-size {meta['spec']['mount_memory']} --cache-size "
        f"{meta['spec']['disk_cache']}` (4 MiB blocks); workers `cloudfs cache serve --no-token "
        f"--memory-cache-size {meta['spec']['worker_memory']} --cache-size "
        f"{meta['spec']['disk_cache']}`, one per node",
        f"- **Origin:** moto in server mode on 127.0.0.1 behind a proxy adding "
        f"{meta['delay_ms']:g} ms per request (moto reads the whole object for every ranged GET)",
        f"- **Data set:** {meta['workload_text']}; random bytes; every file's crc32 checked on "
        f"every mount; {meta['spec']['large_readers']} files at once per mount for the large "
        f"files, {meta['spec']['small_readers']} for the small",
        f"- **Raw results:** `benchmarks/results/{json_path.name}`",
        "",
        "Each case: N mounts (and, with the group, N workers), all new with empty caches; "
        "the kernel's caches dropped before each phase; all N mounts read the phase's every "
        "file at once, each from its own place in the order. *Origin sent* = every byte the "
        "origin answered at the proxy (GET bodies and headers, LIST pages, HEADs) over the "
        "phase's data set; aggregate rate = N x the data set over the phase's wall time.",
        "",
    ]
    if kept:
        lines += [kept.rstrip("\n"), ""]
    lines += ["## Large files", "", *phase_table(data, "large"), ""]
    lines += ["## Small files", "", *phase_table(data, "small"), ""]
    lines += ["## One block: a peer vs the origin", "", *transfer_table(data), ""]
    lines += ["## The ring: cost per block and balance", "", *ring_table(data), ""]
    lines += [
        "## On paper: 100 and 1,000 nodes",
        "",
        "Alone, every node fetches the data set itself (the 1-node multiple times N). With "
        "a group each block leaves the origin once (one owner), but every mount still lists "
        "the bucket itself: the group's multiple is a line through its 1-node and "
        f"{max(meta['spec']['nodes'])}-node cases, and its growth per node is the listing.",
        "",
        *projection(data),
        "",
    ]
    errors = [
        f"- repeat {rep['index'] + 1}, {name}: {e}"
        for rep in data["repeats"]
        for name, case in rep.get("cases", {}).items()
        for e in case.get("errors", [])
    ]
    lines += ["## Errors", "", *(errors or ["None: every case of every repeat completed."]), ""]
    target.write_text("\n".join(lines))
