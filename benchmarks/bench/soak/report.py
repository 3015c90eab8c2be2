"""The soak's verdict: bytes lost (every closed checkpoint against the bucket), operations
and failures (allowed or not), memory flatness and recovery; a JSON report and a table."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

from .faults import Window, excused_by, first_reads
from .workload import Op

MAX_LISTED_FAILURES = 200


def bytes_lost(client: Any, bucket: str, closed: dict[str, tuple[str, int]]) -> dict[str, Any]:
    """Compare each closed file with its object, read straight from the server (boto3)."""
    lost = 0
    bad: list[dict[str, Any]] = []
    for key, (digest, size) in sorted(closed.items()):
        try:
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception as e:  # a missing object is a loss, reported
            lost += size
            bad.append({"key": key, "size": size, "problem": f"{type(e).__name__}: {e}"})
            continue
        if hashlib.sha256(body).hexdigest() != digest:
            lost += size
            bad.append({"key": key, "size": size, "problem": f"differs ({len(body)} bytes)"})
    return {
        "files_checked": len(closed),
        "bytes_checked": sum(size for _, size in closed.values()),
        "bytes_lost": lost,
        "bad_files": bad,
    }


def operations(ops: list[Op], windows: list[Window]) -> dict[str, Any]:
    done: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    allowed: Counter[str] = Counter()
    listed: list[dict[str, Any]] = []
    not_allowed = 0
    known = first_reads(ops)
    for op in ops:
        stream = f"{op.kind}@{op.mount}"
        done[stream] += 1
        if op.ok:
            continue
        failed[stream] += 1
        fault = excused_by(op, windows, known)
        if fault is None:
            not_allowed += 1
        else:
            allowed[fault] += 1
        if fault is None or len(listed) < MAX_LISTED_FAILURES:
            listed.append(
                {
                    "stream": stream,
                    "path": op.path,
                    "start": round(op.start, 2),
                    "end": round(op.end, 2),
                    "error": op.error,
                    "allowed_by": fault,
                }
            )
    return {
        "done": dict(done),
        "failed": dict(failed),
        "failed_allowed_by_fault": dict(allowed),
        "failed_not_allowed": not_allowed,
        "slowest_op_s": round(max((op.end - op.start for op in ops), default=0.0), 2),
        "failures": listed,
    }


def verdict(report: dict[str, Any]) -> list[str]:
    """Why the soak failed (empty: it passed)."""
    why = []
    if report["verify"]["bytes_lost"]:
        why.append(f"{report['verify']['bytes_lost']} bytes lost")
    if report["ops"]["failed_not_allowed"]:
        why.append(f"{report['ops']['failed_not_allowed']} failures outside what faults allow")
    for name in ("writer", "reader", "dataset"):
        if name not in report["memory"]:
            why.append(f"{name} mount: no memory samples (its pid was not found)")
    for name, flat in report["memory"].items():
        if not flat["flat"]:
            why.append(f"{name} mount: memory or fds not flat")
    for w in report["faults"]:
        if w["error"]:
            why.append(f"{w['name']}: {w['error']}")
        rec = report["recovery"].get(w["name"])
        if rec is None:
            why.append(f"{w['name']}: never ran to its end")
        elif any(v is None for v in rec.values()):
            why.append(f"{w['name']}: not recovered for {[k for k, v in rec.items() if v is None]}")
    if report["flush"]["rc"] != 0:
        why.append(f"flush exited {report['flush']['rc']}")
    if report["hung_threads"]:
        why.append(f"workload threads still running at the end: {report['hung_threads']}")
    return why


def summary(report: dict[str, Any]) -> str:
    ops, ver = report["ops"], report["verify"]
    lines = [
        f"soak: {report['meta']['duration_s']:.0f} s, {report['meta']['scaling']['note']}",
        f"ops: {sum(ops['done'].values())} done {ops['done']}; failed {ops['failed']}",
        f"  allowed by fault {ops['failed_allowed_by_fault']}; "
        f"not allowed {ops['failed_not_allowed']}; slowest op {ops['slowest_op_s']} s",
        f"bytes lost: {ver['bytes_lost']} of {ver['bytes_checked']} in "
        f"{ver['files_checked']} closed files (flush {report['flush']['seconds']:.1f} s)",
    ]
    for name, m in report["memory"].items():
        if "rss_first_third_mib" in m:
            lines.append(
                f"{name} mount: RSS {m['rss_first_third_mib']} -> {m['rss_last_third_mib']} MiB"
                f" (max {m['rss_max_mib']}), fds {m['fds_first_third']} -> "
                f"{m['fds_last_third']} (max {m['fds_max']}): {'flat' if m['flat'] else 'GROWS'}"
            )
        else:
            lines.append(f"{name} mount: {m['why']}")
    lines.append(f"{'fault':<18} {'at s':>6} {'len s':>6} {'repair s':>8}  recovery s")
    for w in report["faults"]:
        rec = report["recovery"].get(w["name"], {})
        start = f"{w['start']:.0f}" if w["start"] is not None else "-"
        length = f"{w['end'] - w['start']:.0f}" if w["end"] is not None else "-"
        repair = f"{w['repair_s']:.1f}" if w["repair_s"] is not None else "-"
        recs = ", ".join(f"{k} {v}" for k, v in rec.items())
        lines.append(f"{w['name']:<18} {start:>6} {length:>6} {repair:>8}  {recs}")
    why = report["verdict"]
    lines.append("PASS" if not why else "FAIL: " + "; ".join(why))
    return "\n".join(lines)


def markdown(report: dict[str, Any], json_path: str) -> str:
    """The RESULTS.md section for one soak: command, figures, a row per fault."""
    meta, ops, ver = report["meta"], report["ops"], report["verify"]
    machine = meta["machine"]
    minutes = meta["duration_s"] / 60
    lines = [
        f"## Soak under faults ({minutes:.0f} minutes)",
        "",
        f"- **Command:** `{meta['command']}`",
        f"- **Date:** {machine['date']}; wall time {meta['wall_s'] / 60:.1f} min; commit "
        f"{machine['cloudfs_commit']}; {machine['nproc']} CPUs, {machine['memory_gib']} GiB "
        "(a machine shared with other test runs)",
        f"- **Raw results:** `{json_path}`",
        f"- **Schedule:** {meta['scaling']['note']}; other faults "
        f"{meta['scaling']['other_fault_s']:.0f} s each, {meta['scaling']['gap_s']:.0f} s "
        f"apart, after {meta['scaling']['warmup_s']:.0f} s of warm-up",
        f"- **Verdict:** {'; '.join(report['verdict']) or 'PASS'}",
        "",
        "| figure | value |",
        "|---|---|",
        f"| operations done | {sum(ops['done'].values()):,} ("
        + ", ".join(f"{k} {v:,}" for k, v in sorted(ops["done"].items()))
        + ") |",
        f"| failed, allowed by a fault | {sum(ops['failed_allowed_by_fault'].values())} ("
        + ", ".join(f"{k} {v}" for k, v in ops["failed_allowed_by_fault"].items())
        + ") |",
        f"| failed, not allowed | {ops['failed_not_allowed']} |",
        f"| slowest operation | {ops['slowest_op_s']} s |",
        f"| bytes lost | {ver['bytes_lost']} of {ver['bytes_checked']:,} in "
        f"{ver['files_checked']} closed checkpoint files |",
        f"| final flush | {report['flush']['seconds']:.1f} s (exit {report['flush']['rc']}) |",
    ]
    for name, m in report["memory"].items():
        if "rss_first_third_mib" in m:
            lines.append(
                f"| {name} mount RSS (MiB), first third / last third / max | "
                f"{m['rss_first_third_mib']} / {m['rss_last_third_mib']} / {m['rss_max_mib']}"
                f" ({'flat' if m['rss_flat'] else 'grows'}) |"
            )
            lines.append(
                f"| {name} mount open fds, first third / last third / max | "
                f"{m['fds_first_third']:g} / {m['fds_last_third']:g} / {m['fds_max']}"
                f" ({'flat' if m['fds_flat'] else 'grows'}) |"
            )
    lines += [
        "",
        "| fault | at (s) | lasted (s) | repair (s) | recovery (s): first success after it |",
        "|---|---|---|---|---|",
    ]
    for w in report["faults"]:
        rec = report["recovery"].get(w["name"], {})
        lasted = f"{w['end'] - w['start']:.0f}" if w["end"] is not None else "-"
        repair = f"{w['repair_s']:.1f}" if w["repair_s"] is not None else "-"
        recs = ", ".join(f"{k} {v}" for k, v in rec.items())
        start = f"{w['start']:.0f}" if w["start"] is not None else "-"
        lines.append(f"| {w['name']}: {w['what']} | {start} | {lasted} | {repair} | {recs} |")
    return "\n".join(lines) + "\n"
