"""Medians and target verdicts of an epoch benchmark run (``benchmarks/epochs.py``)
into ``benchmarks/RESULTS-epochs.md``.

Every figure is the median over the repeats of one run of the benchmark (min-max after
it); a ratio is the ratio of the two medians. The part between the HAND-WRITTEN markers
is kept when the file is regenerated.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import display_path, num

BEGIN = "<!-- BEGIN HAND-WRITTEN: findings -->"
END = "<!-- END HAND-WRITTEN -->"
LATER = (2, 3)  # the epochs after the first, where the cache's content matters


# --- reading the raw results --------------------------------------------------------------


def _epochs(rep: dict[str, Any], run: str) -> list[dict[str, Any]]:
    r = rep.get("runs", {}).get(run)
    if not r or r.get("error"):
        return []
    return list(r.get("epochs", []))


def per_repeat(data: dict[str, Any], fn: Callable[[dict[str, Any]], float | None]) -> list[float]:
    out = []
    for rep in data["repeats"]:
        v = fn(rep)
        if v is not None:
            out.append(float(v))
    return out


def epoch_value(run: str, epochs: tuple[int, ...], key: str) -> Callable[[dict[str, Any]], Any]:
    """Per repeat: the mean of ``key`` over ``epochs`` of ``run`` (None if any is missing)."""

    def fn(rep: dict[str, Any]) -> float | None:
        found = [e.get(key) for e in _epochs(rep, run) if e["epoch"] in epochs]
        if len(found) != len(epochs) or any(v is None for v in found):
            return None
        return statistics.fmean(float(v) for v in found)

    return fn


def origin_value(rep: dict[str, Any]) -> float | None:
    o = rep.get("origin")
    return None if not o else float(o["files_s"])


def job_any_hit(e: dict[str, Any]) -> float | None:
    """Reads a tier held when they came, kept or prefetched (no wait for a GET they started)."""
    read = e.get("job_read_bytes") or 0
    if not read:
        return None
    return (e.get("job_hit_bytes", 0) + e.get("job_prefetch_hit_bytes", 0)) / read


@dataclass
class Stat:
    values: list[float]

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def cell(self, fmt: Callable[[float], str] = num) -> str:
        if not self.values:
            return "-"
        text = fmt(statistics.median(self.values))
        if len(self.values) > 1:
            text += f" ({fmt(min(self.values))}-{fmt(max(self.values))})"
        return text


def pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def secs(v: float) -> str:
    return f"{v:.1f}"


def stat(data: dict[str, Any], run: str, epochs: tuple[int, ...], key: str) -> Stat:
    return Stat(per_repeat(data, epoch_value(run, epochs, key)))


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def rx(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


# --- targets ---------------------------------------------------------------------------------


@dataclass
class Verdict:
    target: str
    wanted: str
    measured: str
    met: bool | None  # None: not measured
    note: str = ""

    def row(self) -> str:
        mark = "not measured" if self.met is None else "**met**" if self.met else "**missed**"
        return f"| {self.target} | {self.wanted} | {self.measured} | {mark} | {self.note} |"


def _ge(v: float | None, goal: float) -> bool | None:
    return None if v is None else v >= goal


def _le(v: float | None, goal: float) -> bool | None:
    return None if v is None else v <= goal


def _by(v: float | None, goal: float, higher: bool) -> str:
    """How far a missed figure is from its goal."""
    if v is None:
        return ""
    if (v >= goal) if higher else (v <= goal):
        return ""
    if higher:
        return f"short by {goal - v:.2f} ({v / goal:.0%} of the goal)"
    return f"over by {v - goal:.2f} ({v / goal:.0%} of the goal)"


def verdicts(data: dict[str, Any]) -> list[Verdict]:
    out: list[Verdict] = []
    origin = Stat(per_repeat(data, origin_value)).median
    for w in (0, 4):
        plain = stat(data, f"cold-w{w}-plain", (1,), "files_s").median
        ann = stat(data, f"cold-w{w}-announce", (1,), "files_s").median
        r = ratio(ann, plain)
        out.append(
            Verdict(
                f"1. epoch 1 cold, announced ÷ not, num_workers {w}",
                ">= 3x files/s",
                f"{rx(r)} ({num(ann)} vs {num(plain)} files/s)",
                _ge(r, 3.0),
                _by(r, 3.0, True),
            )
        )
    for w in (0, 4):
        ann = stat(data, f"cold-w{w}-announce", (1,), "files_s").median
        r = ratio(ann, origin)
        out.append(
            Verdict(
                f"1. epoch 1 cold announced ÷ origin 16-thread GETs, num_workers {w}",
                ">= 0.9x",
                f"{rx(r)} ({num(ann)} vs {num(origin)} files/s)",
                _ge(r, 0.9),
                _by(r, 0.9, True),
            )
        )
    get_hit = stat(data, "half-announce", LATER, "get_hit_ratio").median
    job_hit = stat(data, "half-announce", LATER, "job_hit_ratio").median
    out.append(
        Verdict(
            "2. half cache, announced: hit ratio epochs 2-3, by GETs (1 - GETs/files)",
            ">= 45%",
            "-" if get_hit is None else pct(get_hit),
            _ge(get_hit, 0.45),
            _by(None if get_hit is None else 100 * get_hit, 45, True).replace("(", "points ("),
        )
    )
    out.append(
        Verdict(
            "2. half cache, announced: hit ratio epochs 2-3, by job metrics (hit ÷ read bytes)",
            ">= 45%",
            "-" if job_hit is None else pct(job_hit),
            _ge(job_hit, 0.45),
            _by(None if job_hit is None else 100 * job_hit, 45, True).replace("(", "points ("),
        )
    )
    ann_s = stat(data, "half-announce", LATER, "seconds").median
    for policy in ("lru", "tinylfu"):
        base = stat(data, f"half-{policy}", LATER, "seconds").median
        r = ratio(ann_s, base)
        out.append(
            Verdict(
                f"2. half cache: epoch time (2-3) announced ÷ no announcements, {policy}",
                "<= 0.6x",
                f"{rx(r)} ({num(ann_s)} vs {num(base)} s)",
                _le(r, 0.6),
                _by(r, 0.6, False),
            )
        )
    first = stat(data, "half-cache-first", LATER, "seconds").median
    lru = stat(data, "half-lru", LATER, "seconds").median
    r = ratio(first, lru)
    out.append(
        Verdict(
            "3. half cache: epoch time (2-3) cache_first ÷ LRU without announcements",
            "<= 0.4x",
            f"{rx(r)} ({num(first)} vs {num(lru)} s)",
            _le(r, 0.4),
            _by(r, 0.4, False),
        )
    )
    for run in ("half-announce", "half-cache-first"):
        for key, what in (("get_hit_ratio", "GETs"), ("job_hit_ratio", "job metrics")):
            out.append(_prediction_verdict(data, run, key, what))
    return out


def _prediction_verdict(data: dict[str, Any], run: str, key: str, what: str) -> Verdict:
    gaps = per_repeat(data, _worst_gap(run, key))
    target = f"4. predicted cached fraction vs hit ratio by {what}, {run}, epochs 2-3"
    if not gaps:
        return Verdict(target, "within 5 points", "-", None)
    gap = statistics.median(gaps)
    measured = f"worst gap of the two epochs {100 * gap:.1f} points (max {100 * max(gaps):.1f})"
    note = "" if gap <= 0.05 else f"over by {100 * (gap - 0.05):.1f} points"
    return Verdict(target, "within 5 points", measured, gap <= 0.05, note)


def _worst_gap(run: str, key: str) -> Callable[[dict[str, Any]], float | None]:
    def fn(rep: dict[str, Any]) -> float | None:
        gaps = []
        for e in _epochs(rep, run):
            if e["epoch"] in LATER and e.get(key) is not None:
                predicted = e.get("predicted_cached")
                if predicted is None:
                    predicted = e.get("announced_cached")
                if predicted is None:
                    return None
                gaps.append(abs(float(predicted) - float(e[key])))
        return max(gaps) if gaps else None

    return fn


# --- the report ------------------------------------------------------------------------------


def header(data: dict[str, Any], json_path: Path) -> list[str]:
    meta = data["meta"]
    mach = meta.get("machine", {})
    spec = meta.get("spec", {})
    n = len(data["repeats"])
    dirty = " (cloudfs/ had uncommitted changes)" if mach.get("cloudfs_tree_dirty") else ""
    cut = spec.get("plain_w0_max_files")
    extra = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in spec.get("extra_options") or [])
    return [
        "# CloudFS epoch hints: a PyTorch DataLoader with and without announced orders",
        "",
        "Generated by `benchmarks/epochs.py`. Each figure is the **median (min-max) of "
        f"{n} repeat{'s' if n != 1 else ''}** in one run on one machine; a ratio is the ratio "
        "of two medians. The machine is shared (other engineers ran tests meanwhile): "
        "only ratios from one run mean anything.",
        "",
        f"- **Command:** `{meta['command']}`",
        f"- **Date:** {mach.get('date', '?')}; wall time "
        f"{meta.get('wall_seconds', 0) / 60:.0f} min",
        f"- **Machine:** {mach.get('nproc', '?')} CPUs ({mach.get('cpu', '?')}), "
        f"{mach.get('memory_gib', '?')} GiB memory, Linux {mach.get('kernel', '?')}, "
        f"Python {mach.get('python', '?')}; PyTorch CPU only",
        f"- **CloudFS:** {meta.get('cloudfs_version', '?')}, commit "
        f"{mach.get('cloudfs_commit', '?')}{dirty}; every run a fresh `cloudfs mount "
        f"--read-only` (dataset mode) with an empty cache directory, `--memory-cache-size "
        f"{spec.get('memory_cache', '?')} --block-size {spec.get('block_size', '?')} "
        '--free-space-ratio 0`, `--cache-size` twice the data set ("full") or half of it '
        '("half")'
        + (f", and **`{extra}`**" if extra else "")
        + ", other options at their defaults (`--order-window-files 512`, "
        "`--order-window-size` half the memory cache, `--order-parallel 32`)",
        f"- **Origin:** moto in server mode on 127.0.0.1 behind a TCP proxy that waits "
        f"**{meta.get('delay_ms', 0):.0f} ms before each request** "
        "(`testkit/faults_proxy.py`, which also counts the requests); the data set is "
        "written straight to moto",
        f"- **Data set:** {meta.get('workload_text', '?')}: one 1 MiB block per file",
        f"- **Loader:** `torch.utils.data.DataLoader`, batch size {spec.get('batch_size', '?')}, "
        "each item `open(path, 'rb').read()` of its whole file, returning the length (no "
        "decoding); every epoch a new seeded permutation, the same one in every mode. "
        "Announced: `cloudfs.torch.CloudFSSampler` wrapping that permutation's sampler "
        "(the run records which sampler class it used)",
        "- **Page cache:** `sync; echo 3 > /proc/sys/vm/drop_caches` before every epoch: "
        "the data set (537 MiB) stands for one larger than RAM, so no epoch is served by "
        "the kernel's page cache",
        "- **Hit ratios:** *by GETs* = 1 - object GETs at the proxy ÷ files read (a file is "
        "one block, so each file the cache did not keep costs one GET; prefetch GETs "
        "count); *by job metrics* = `cloudfs_job_hit_bytes_total` ÷ "
        "`cloudfs_job_read_bytes_total` over the epoch (bytes a tier held from before this "
        "epoch's prefetch); *predicted* = `cloudfs_job_next_epoch_cached_ratio` (bytes of "
        "the order cached when it was announced)",
        *(
            [
                f"- **Cut:** the cold num_workers 0 epoch without announcements stops at the "
                f"first batch boundary past {cut:,} files (its rate is steady: one GET after "
                "another); its files/s is over what it read"
            ]
            if cut
            else []
        ),
        f"- **Raw results:** `{display_path(json_path)}`",
        "",
    ]


def targets_table(data: dict[str, Any]) -> list[str]:
    lines = [
        "## Targets",
        "",
        "| target | goal | measured (median) | verdict | miss |",
        "|---|---|---|---|---|",
    ]
    lines += [v.row() for v in verdicts(data)]
    return [*lines, ""]


def scenario1(data: dict[str, Any]) -> list[str]:
    origin = Stat(per_repeat(data, origin_value))
    lines = [
        "## 1. Epoch 1, cold, disk cache twice the data set",
        "",
        f"Origin ceiling: 16 boto3 threads GETting every object (shuffled) through the same "
        f"proxy: **{origin.cell()} files/s**.",
        "",
        "| num_workers | no announcements, files/s | announced, files/s | announced ÷ not "
        "| announced ÷ origin | stall s (announced) | CPU busy, plain / announced |",
        "|---|---|---|---|---|---|---|",
    ]
    for w in (0, 4):
        plain = stat(data, f"cold-w{w}-plain", (1,), "files_s")
        ann = stat(data, f"cold-w{w}-announce", (1,), "files_s")
        stall = stat(data, f"cold-w{w}-announce", (1,), "job_stall_s")
        busy_p = stat(data, f"cold-w{w}-plain", (1,), "cpu_busy")
        busy_a = stat(data, f"cold-w{w}-announce", (1,), "cpu_busy")
        lines.append(
            f"| {w} | {plain.cell()} | {ann.cell()} | {rx(ratio(ann.median, plain.median))} | "
            f"{rx(ratio(ann.median, origin.median))} | {stall.cell(secs)} | "
            f"{busy_p.cell(pct)} / {busy_a.cell(pct)} |"
        )
    lines += [
        "",
        "CPU busy: CPU seconds of the mount, moto, the loader (with its workers) and the "
        "proxy over the epoch, ÷ (seconds x CPUs). Stall: `cloudfs_job_stall_seconds_total`, "
        "summed over the loader's reading processes.",
        "",
    ]
    return lines


RUNS2 = (
    ("half-announce", "announced (Belady eviction; tinylfu admission for the rest)"),
    ("half-lru", "no announcements, `--cache-policy lru`"),
    ("half-tinylfu", "no announcements, tinylfu (the default)"),
    ("half-cache-first", "`CloudFSSampler(cache_first=True)`"),
)


def scenario2(data: dict[str, Any]) -> list[str]:
    lines = [
        "## 2 and 3. Disk cache half the data set, 3 epochs, num_workers 4",
        "",
        "| run | epoch | seconds | files/s | GETs | hit by GETs | hit by job metrics "
        "| held when read (kept or prefetched) | predicted | stall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run, label in RUNS2:
        if not any(_epochs(rep, run) for rep in data["repeats"]):
            continue
        for epoch in (1, 2, 3):
            e = (epoch,)
            lines.append(
                f"| {label} | {epoch} | {stat(data, run, e, 'seconds').cell(secs)} | "
                f"{stat(data, run, e, 'files_s').cell()} | {stat(data, run, e, 'gets').cell()} | "
                f"{stat(data, run, e, 'get_hit_ratio').cell(pct)} | "
                f"{stat(data, run, e, 'job_hit_ratio').cell(pct)} | "
                f"{Stat(per_repeat(data, _any_hit(run, epoch))).cell(pct)} | "
                f"{stat(data, run, e, 'predicted_cached').cell(pct)} | "
                f"{stat(data, run, e, 'job_stall_s').cell(secs)} |"
            )
    lines += ["", "Epochs 2-3 (mean of the two, then the median over repeats):", ""]
    lines += ["| run | seconds | ÷ LRU | ÷ tinylfu | hit by GETs |", "|---|---|---|---|---|"]
    lru = stat(data, "half-lru", LATER, "seconds").median
    tiny = stat(data, "half-tinylfu", LATER, "seconds").median
    for run, label in RUNS2:
        s = stat(data, run, LATER, "seconds")
        if not s.values:
            continue
        lines.append(
            f"| {label} | {s.cell(secs)} | {rx(ratio(s.median, lru))} | "
            f"{rx(ratio(s.median, tiny))} | {stat(data, run, LATER, 'get_hit_ratio').cell(pct)} |"
        )
    return [*lines, ""]


def _any_hit(run: str, epoch: int) -> Callable[[dict[str, Any]], float | None]:
    def fn(rep: dict[str, Any]) -> float | None:
        for e in _epochs(rep, run):
            if e["epoch"] == epoch:
                return job_any_hit(e)
        return None

    return fn


def cpu_table(data: dict[str, Any]) -> list[str]:
    lines = [
        "## Where the CPU went (CPU seconds per 1,000 files read, epoch 1 / epochs 2-3)",
        "",
        "| run | mount | moto | proxy | loader | CPU busy, epoch 1 |",
        "|---|---|---|---|---|---|",
    ]
    names = [r["name"] for r in data["meta"].get("runs", [])]
    for run in names:

        def per_k(part: str, epochs: tuple[int, ...], run: str = run) -> Stat:
            def fn(rep: dict[str, Any]) -> float | None:
                es = [e for e in _epochs(rep, run) if e["epoch"] in epochs and e.get("cpu_s")]
                if not es:
                    return None
                files = sum(e["files"] for e in es)
                return 1000 * sum(e["cpu_s"][part] for e in es) / files

            return Stat(per_repeat(data, fn))

        cells = []
        for part in ("mount", "moto", "proxy", "loader"):
            a, b = per_k(part, (1,)), per_k(part, LATER)
            cells.append(f"{num(a.median)}" + (f" / {num(b.median)}" if b.values else ""))
        busy = stat(data, run, (1,), "cpu_busy")
        lines.append(f"| {run} | " + " | ".join(cells) + f" | {busy.cell(pct)} |")
    return [*lines, ""]


def errors(data: dict[str, Any]) -> list[str]:
    found = []
    for rep in data["repeats"]:
        for name, r in rep.get("runs", {}).items():
            if r.get("error"):
                found.append(f"repeat {rep['index'] + 1}, {name}: {r['error']}")
            for note in r.get("mount_notes") or []:
                found.append(f"repeat {rep['index'] + 1}, {name}: mount: {note}")
    lines = ["## Errors", ""]
    lines += [f"- {e}" for e in found] if found else ["None: every run completed."]
    return [*lines, ""]


def hand_written(previous: str | None) -> list[str]:
    if previous and BEGIN in previous and END in previous:
        kept = previous.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")
        return [BEGIN, kept, END, ""]
    return [BEGIN, "_Written by hand; kept when the report is regenerated._", END, ""]


def render(data: dict[str, Any], json_path: Path, previous: str | None) -> str:
    lines = header(data, json_path)
    lines += targets_table(data)
    lines += ["## Findings", "", *hand_written(previous)]
    lines += scenario1(data)
    lines += scenario2(data)
    lines += cpu_table(data)
    lines += errors(data)
    return "\n".join(lines).rstrip("\n") + "\n"


def write(data: dict[str, Any], path: Path, json_path: Path) -> None:
    previous = path.read_text() if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data, json_path, previous))
