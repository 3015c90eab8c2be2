"""Medians and ratios of a write benchmark run (issue 5) into RESULTS-writes.md.

The part between the HAND-WRITTEN markers is kept when the file is regenerated, and so is
the table of a workload this run did not measure (``--workloads``), marked as from the
run that did.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import display_path, num

SYSTEMS = ("cloudfs-back", "cloudfs-through", "s3fs", "rclone", "local", "origin")
LABELS = {
    "cloudfs-back": "CloudFS back",
    "cloudfs-through": "CloudFS through",
    "s3fs": "s3fs-fuse",
    "rclone": "rclone",
    "local": "local disk",
    "origin": "origin, boto3 PUTs ⁴",
}
ORIGIN_TEXT = {
    "moto": "moto in server mode (Python)",
    "s3rver": "s3rver (Node.js, `benchmarks/bench/s3rver.py`)",
}
BACK = "cloudfs-back"
PEERS = ("local", "s3fs", "rclone")
BEGIN = "<!-- BEGIN HAND-WRITTEN: reading the numbers -->"
END = "<!-- END HAND-WRITTEN -->"


@dataclass(frozen=True)
class Row:
    label: str
    key: str


WORKLOADS: dict[str, tuple[str, tuple[Row, ...]]] = {
    "large": (
        "(a) one {large} file, written sequentially in 1 MiB writes, then closed",
        (
            Row("MiB/s, open to the end of close (higher is better)", "large_mib_s"),
            Row("MiB/s, open until all in S3 ¹ (higher is better)", "large_mib_s_to_s3"),
            Row("close latency, ms (lower is better)", "large_close_ms"),
            Row("s from the close until it is all in S3 ¹ (lower is better)", "large_to_s3_s"),
            Row("`cloudfs flush` command, s (write-back only)", "large_flush_s"),
            Row("requests through the proxy per file ²", "large_requests_per_file"),
        ),
    ),
    "small": (
        "(b) {count} files of 1 MiB, each opened, written and closed, one thread",
        (
            Row("files written ³", "small_files_written"),
            Row("files/s (higher is better)", "small_files_s"),
            Row("files/s, first open until all in S3 ¹ (higher is better)", "small_files_s_to_s3"),
            Row("open (create) latency p50, ms", "small_open_p50_ms"),
            Row("write (1 MiB) latency p50, ms", "small_write_p50_ms"),
            Row("close latency p50, ms (lower is better)", "small_close_p50_ms"),
            Row("close latency p99, ms (lower is better)", "small_close_p99_ms"),
            Row("s from the last close until all in S3 ¹ (lower is better)", "small_to_s3_s"),
            Row("`cloudfs flush` command, s (write-back only)", "small_flush_s"),
            Row("requests through the proxy per file ²", "small_requests_per_file"),
        ),
    ),
    "many": (
        "(c) {many_count} new files of {many_size}, created, written and closed by "
        "{many_threads} threads (issue 27)",
        (
            Row("files written ³", "many_files_written"),
            Row("files/s to the end of the last close (higher is better)", "many_files_s"),
            Row("files/s with an fsync before each close (local disk)", "many_fsync_files_s"),
            Row("files/s, first open until all in S3 ¹ (higher is better)", "many_files_s_to_s3"),
            Row("open (create) latency p50, ms", "many_open_p50_ms"),
            Row("write (110 KiB) latency p50, ms", "many_write_p50_ms"),
            Row("close latency p50, ms (lower is better)", "many_close_p50_ms"),
            Row("close latency p99, ms (lower is better)", "many_close_p99_ms"),
            Row("s from the last close until all in S3 ¹ (lower is better)", "many_to_s3_s"),
            Row("`cloudfs flush` command, s (write-back only)", "many_flush_s"),
            Row("requests through the proxy per file ²", "many_requests_per_file"),
        ),
    ),
}


def values(data: dict[str, Any], system: str, key: str) -> list[float]:
    out = []
    for rep in data["repeats"]:
        v = rep.get("systems", {}).get(system, {}).get("results", {}).get(key)
        if v is not None:
            out.append(float(v))
    return out


def median(data: dict[str, Any], system: str, key: str) -> float | None:
    vs = values(data, system, key)
    return statistics.median(vs) if vs else None


def cell(data: dict[str, Any], system: str, key: str) -> str:
    vs = values(data, system, key)
    if not vs:
        return "-"
    show = (lambda v: f"{v:,.0f}") if key.endswith("_written") else num
    text = show(statistics.median(vs))
    return text + (f" ({show(min(vs))}-{show(max(vs))})" if len(vs) > 1 else "")


def times(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    return f"{r:,.0f}x" if r >= 100 else f"{r:.2f}x" if r >= 0.01 else f"{r:.4f}x"


def present(data: dict[str, Any]) -> list[str]:
    seen = {name for rep in data["repeats"] for name in rep.get("systems", {})}
    return [s for s in SYSTEMS if s in seen]


def header(data: dict[str, Any], json_path: Path) -> list[str]:
    meta = data["meta"]
    mach = meta.get("machine", {})
    n = len(data["repeats"])
    dirty = " (cloudfs/ had uncommitted changes)" if mach.get("cloudfs_tree_dirty") else ""
    opts = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in meta["cloudfs_options"].items())
    versions = ", ".join(f"{k}: {v}" for k, v in meta.get("versions", {}).items())
    lines = [
        "# CloudFS writes: write-back vs write-through, s3fs-fuse, rclone and local disk",
        "",
        "Generated by `benchmarks/writes.py` (issue 5). Each cell is the **median (min-max) "
        f"of {n} repeat{'s' if n != 1 else ''}** on one machine in one run; only ratios from "
        "one run mean anything (the machine is shared and noisy).",
        "",
        f"- **Command:** `{meta['command']}` (`bash benchmarks/writes.sh` installs s3fs and "
        "rclone, then runs it)",
        f"- **Date:** {mach.get('date', '?')}; wall time {meta.get('wall_seconds', 0) / 60:.0f} "
        f"min; each pass limited to {meta.get('pass_timeout_s', 0):.0f} s",
        f"- **Machine:** {mach.get('nproc', '?')} CPUs ({mach.get('cpu', '?')}), "
        f"{mach.get('memory_gib', '?')} GiB memory, Linux {mach.get('kernel', '?')}, "
        f"Python {mach.get('python', '?')}",
        f"- **CloudFS:** {meta.get('cloudfs_version', '?')}, commit "
        f"{mach.get('cloudfs_commit', '?')}{dirty}; `{opts} --write-mode back|through`, "
        "other options at their defaults",
        f"- **Peers:** {versions or '?'}; s3fs with `-o use_cache=DIR`, rclone with "
        "`--vfs-cache-mode full` (so `--vfs-write-back 5s`), otherwise defaults",
        f"- **Origin:** {ORIGIN_TEXT.get(meta.get('origin', 'moto'), '?')} on 127.0.0.1, reached "
        "by every system through a "
        f"TCP proxy that waits **{meta.get('delay_ms', 0):.0f} ms before each request**; "
        "the benchmark itself lists and reads the bucket directly",
        f"- **Workloads:** {meta.get('workload_text', '?')}; each on a fresh mount with an "
        "empty cache after `sync; echo 3 > /proc/sys/vm/drop_caches`, in a child process",
        f"- **Raw results:** `{display_path(json_path)}`",
    ]
    skipped = meta.get("skipped") or {}
    if skipped:
        lines.append("- **Skipped:** " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    return [*lines, ""]


def table(data: dict[str, Any], workload: str, names: list[str]) -> list[str]:
    spec = data["meta"]["workloads"]
    title, rows = WORKLOADS[workload]
    title = title.format(
        large=f"{spec['large_size'] >> 20} MiB",
        count=f"{spec['small_count']:,}",
        many_count=f"{spec.get('many_count', 0):,}",
        many_size=f"{spec.get('many_size', 0) >> 10} KiB",
        many_threads=spec.get("many_threads", 0),
    )
    peers = [p for p in PEERS if p in names] if BACK in names else []
    cols = [LABELS[s] for s in names] + [f"back ÷ {LABELS[p]}" for p in peers]
    lines = [f"## {title}", "", "| | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for row in rows:
        if all(not values(data, s, row.key) for s in names):
            continue
        cells = [cell(data, s, row.key) for s in names]
        back = median(data, BACK, row.key)
        if row.key.endswith("_written"):
            cells += ["" for _ in peers]
        else:
            cells += [times(back, median(data, p, row.key)) for p in peers]
        lines.append(f"| {row.label} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def verification(data: dict[str, Any], names: list[str]) -> list[str]:
    lines = [
        "## Verification",
        "",
        "After each pass and unmount: every file's size in the bucket (local disk: in the "
        "directory), nothing extra, and the SHA-256 of a sample (the large file; 20 of the "
        "small files of (b) and of (c)) against the bytes written. Repeats that passed:",
        "",
        "| | " + " | ".join(LABELS[s] for s in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for workload in (*WORKLOADS, "many_fsync"):
        cells = []
        for s in names:
            runs = [
                r["systems"][s]["verified"]
                for r in data["repeats"]
                if workload in r.get("systems", {}).get(s, {}).get("verified", {})
            ]
            ok = sum(1 for r in runs if r[workload])
            if not runs:
                cells.append("-")
                continue
            cells.append(f"{ok}/{len(runs)}" + ("" if ok == len(runs) else " **FAILED**"))
        if all(c == "-" for c in cells):
            continue
        lines.append(f"| {workload} | " + " | ".join(cells) + " |")
    lines.append("")
    errors: list[str] = []
    for rep in data["repeats"]:
        for s, run in rep.get("systems", {}).items():
            errors += [f"repeat {rep['index'] + 1}, {LABELS[s]}: {e}" for e in run["errors"]]
    lines += ["### Errors", ""]
    lines += [f"- {e}" for e in errors] if errors else ["None: every pass completed and verified."]
    return [*lines, ""]


NOTES = [
    "¹ Measured from the wall-clock time just after the last close (the MiB/s and files/s "
    "rows: from the first open). CloudFS back: until `cloudfs flush MOUNTPOINT` returns (this "
    "includes starting the command, about 0.6 s of Python start-up here), and the bucket is "
    "then checked to hold everything. Other systems: polling the bucket every 0.2 s until "
    "every file is listed at its full size.",
    "",
    "² Every HTTP request the mount sent through the latency proxy from the pass's start "
    "until everything was in S3, divided by the number of files.",
    "",
    "⁴ No filesystem: the same new files PUT straight to the origin by as many boto3 "
    "threads as (c) has writers, through the same proxy; the origin's own ceiling for (c) "
    "on this machine (it shares the cores with the benchmark, as the mounts do).",
    "",
    "³ A system still writing when the time budget of the small-file pass (or of (c)) ran "
    "out stops after the file in progress (in (c): its threads start no new file); its rates "
    "are over the files it wrote, and only those are waited for and verified.",
    "",
    "**What a close means.** CloudFS back: the file is durable in the mount's local "
    "journal (fsync'd), uploaded in the background; `cloudfs flush` waits for the uploads, "
    "and unmount drains them. CloudFS through and s3fs: the file is in S3 when close "
    "returns. rclone `--vfs-cache-mode full`: the file is in rclone's local cache directory "
    "when close returns; its upload starts `--vfs-write-back` (5 s) after the last close, "
    "and an rclone stopped before then uploads it the next time it runs with the same cache "
    "directory. Local disk: the bytes are in the page cache (no fsync; in (c) also measured "
    "with an fsync before each close, what CloudFS back's close guarantees).",
    "",
]


def hand_written(previous: str | None, begin: str = BEGIN) -> list[str]:
    """The block between ``begin`` and ``END`` in ``previous``, markers included (a
    placeholder when there is none); other reports pass their own ``begin`` marker."""
    if previous and begin in previous and END in previous.split(begin, 1)[1]:
        kept = previous.split(begin, 1)[1].split(END, 1)[0].strip("\n")
        return [begin, kept, END, ""]
    return [begin, "_Written by hand; kept when the report is regenerated._", END, ""]


def kept_table(previous: str | None, workload: str) -> list[str]:
    """The previous report's table of ``workload`` (its section), marked as from its run."""
    letter = WORKLOADS[workload][0][:3]  # "(a)"
    if not previous or f"\n## {letter}" not in previous:
        return []
    section = previous.split(f"\n## {letter}", 1)[1].split("\n## ", 1)[0]
    lines = [f"## {letter}" + section.rstrip("\n").split("\n", 1)[0], ""]
    body = section.rstrip("\n").split("\n", 1)[1].strip("\n").split("\n")
    table_end = max(i for i, line in enumerate(body) if line.startswith("|"))
    body = body[: table_end + 1]  # not the notes that follow the last table
    note = "_Not measured by this run: kept from the previous report"
    if not body[0].startswith("_Not measured"):
        source = previous.split("- **Raw results:** ", 1)[-1].split("\n", 1)[0]
        body = [f"{note} (its run: {source}, its date and command)._", "", *body]
    return [*lines, *body, ""]


def render(data: dict[str, Any], json_path: Path, previous: str | None) -> str:
    names = present(data)
    lines = header(data, json_path)
    lines += ["## Reading the numbers", "", *hand_written(previous)]
    for workload in WORKLOADS:
        if any(values(data, s, f"{workload}_files_s") or values(data, s, f"{workload}_mib_s")
               for s in names):  # fmt: skip
            lines += table(data, workload, names)
        else:
            lines += kept_table(previous, workload)
    lines += NOTES
    lines += verification(data, names)
    return "\n".join(lines).rstrip("\n") + "\n"


def write(data: dict[str, Any], path: Path, json_path: Path) -> None:
    previous = path.read_text() if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data, json_path, previous))
