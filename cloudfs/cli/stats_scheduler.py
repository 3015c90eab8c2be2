"""``cloudfs stats --scheduler``: the embedded scheduler's queues, jobs and data readiness.

One snapshot is two API calls (``list`` and ``report``, ``cloudfs.jobs.server``)
folded by ``build_snapshot`` into what the view shows: per group its queue
(jobs running, warming, queued) and its quota use (GPUs, CPUs, memory, running
jobs allocated against the quota, and what it borrowed past its quota from
other groups' idle quota); per job that has not finished its state, priority,
data readiness, time queued, running time, time stalled on data and, while
it waits, why. ``build_snapshot`` and ``render`` are pure: no I/O, no clock.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cloudfs.cli.stats_view import table
from cloudfs.errors import StartupError
from cloudfs.jobs.client import NoScheduler, request
from cloudfs.jobs.config import RESOURCES
from cloudfs.jobs.record import FINAL, QUEUED, RETRYING, RUNNING, STARTING, WARMING
from cloudfs.sizes import format_size

NONE = "—"
TIMEOUT = 10.0  # seconds to wait for each answer
_STATE_ORDER = {RUNNING: 0, STARTING: 1, WARMING: 2, RETRYING: 3, QUEUED: 4}


def fetch(state_dir: Path) -> dict[str, Any]:
    """One snapshot of the scheduler of ``state_dir`` (``StartupError`` if none runs)."""
    try:
        jobs = request(state_dir, {"op": "list"}, timeout=TIMEOUT)["jobs"]
        report = request(state_dir, {"op": "report"}, timeout=TIMEOUT)["report"]
    except NoScheduler:
        start = "start one: cloudfs job submit, or cloudfs scheduler serve"
        raise StartupError(f"no scheduler at {state_dir} ({start})") from None
    return build_snapshot(jobs, report, time.time(), str(state_dir))


def build_snapshot(
    jobs: list[dict[str, Any]], report: Mapping[str, Any], now: float, state_dir: str
) -> dict[str, Any]:
    """The view's data (and ``--json``'s document) from a ``list`` and a ``report`` answer."""
    queued_seconds = {j["id"]: float(j["queued_seconds"]) for j in report.get("jobs", [])}
    live = [j for j in jobs if j["state"] not in FINAL]
    live.sort(key=lambda j: (j["spec"]["group"], _STATE_ORDER.get(j["state"], 9),
                             -int(j["spec"]["priority"]), int(j["seq"])))  # fmt: skip
    return {
        "state_dir": state_dir,
        "groups": {
            name: _group(bucket) for name, bucket in sorted(report.get("groups", {}).items())
        },
        "jobs": [_job(j, queued_seconds.get(j["id"], 0.0), now) for j in live],
    }


def _group(bucket: Mapping[str, Any]) -> dict[str, Any]:
    counts: Mapping[str, int] = bucket.get("jobs", {})
    quota: Mapping[str, float | None] = bucket.get("quota", {})
    used: Mapping[str, float] = bucket.get("allocated", {})
    borrowed = {}
    for r in RESOURCES:
        limit = quota.get(r)
        if limit is not None and used.get(r, 0.0) > limit:
            borrowed[r] = used[r] - limit
    return {
        "running": counts.get(RUNNING, 0),
        "warming": counts.get(WARMING, 0) + counts.get(STARTING, 0),
        "queued": counts.get(QUEUED, 0) + counts.get(RETRYING, 0),
        "finished": sum(counts.get(s, 0) for s in FINAL),
        "used": {r: used.get(r, 0.0) for r in RESOURCES},
        "quota": {r: quota.get(r) for r in RESOURCES},
        "borrowed": borrowed,
    }


def _job(j: Mapping[str, Any], queued: float, now: float) -> dict[str, Any]:
    spec, state = j["spec"], j["state"]
    started = float(j.get("attempt_started_at") or 0.0)
    return {
        "id": j["id"],
        "name": j.get("name") or spec.get("name", ""),
        "group": spec["group"],
        "user": spec["user"],
        "state": state,
        "priority": int(spec["priority"]),
        "readiness": _readiness(j),
        "queued_seconds": round(queued, 1),
        "running_seconds": round(max(0.0, now - started), 1) if state == RUNNING else None,
        "stall_seconds": round(float(j.get("stall_seconds") or 0.0), 1),
        "reason": str(j.get("reason") or "") if state in (QUEUED, RETRYING) else "",
    }


def _readiness(j: Mapping[str, Any]) -> dict[str, Any] | None:
    """``warming`` (with the share cached and the share needed, once known), ``ready``
    once admitted past warming with volumes to warm, else ``None``."""
    state = j["state"]
    if state == WARMING:
        w = j.get("warmup") or {}
        total = float(w.get("bytes") or 0.0)
        if not total:
            return {"state": "warming", "cached_ratio": None, "target_ratio": None}
        return {"state": "warming", "cached_ratio": float(w["cached_bytes"]) / total,
                "target_ratio": float(w["target"]) / total}  # fmt: skip
    if state in (STARTING, RUNNING) and j["spec"].get("volumes"):
        return {"state": "ready"}
    return None


# -- the text view ---------------------------------------------------------------------


def format_readiness(readiness: Mapping[str, Any] | None) -> str:
    """``warming 63% (≥80%)``, ``warming``, ``ready`` or ``—``."""
    if readiness is None:
        return NONE
    cached, target = readiness.get("cached_ratio"), readiness.get("target_ratio")
    if readiness["state"] == "warming" and cached is not None and target is not None:
        return f"warming {100 * cached:.0f}% (≥{100 * target:.0f}%)"
    return str(readiness["state"])


def format_duration(seconds: float | None) -> str:
    """``—``, ``42s``, ``3m05s``, ``2h04m``."""
    if seconds is None:
        return NONE
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _use(resource: str, used: float, quota: float | None) -> str:
    if resource == "memory":
        return f"{format_size(used)}/{NONE if quota is None else format_size(quota)}"
    return f"{used:g}/{NONE if quota is None else f'{quota:g}'}"


def _borrowed(borrowed: Mapping[str, float]) -> str:
    parts = [f"{r} {format_size(v) if r == 'memory' else f'{v:g}'}" for r, v in borrowed.items()]
    return ", ".join(parts) or NONE


def render(snap: Mapping[str, Any]) -> list[str]:
    """The lines of one refresh: the queue of each group, then the unfinished jobs."""
    lines = [f"CloudFS scheduler {snap['state_dir']}"]
    queues = [["Group", "running", "warming", "queued", "done", "gpus", "cpus", "memory",
               "jobs", "borrowed"]]  # fmt: skip
    for name, g in snap["groups"].items():
        use = [_use(r, g["used"][r], g["quota"][r]) for r in ("gpus", "cpus", "memory", "jobs")]
        queues.append([f"  {name}", str(g["running"]), str(g["warming"]), str(g["queued"]),
                       str(g["finished"]), *use, _borrowed(g["borrowed"])])  # fmt: skip
    lines += table(queues) if snap["groups"] else ["Group   (no groups configured)"]
    if not snap["jobs"]:
        return [*lines, "Jobs    (none queued or running)"]
    rows = [["Job", "name", "group", "user", "state", "prio", "data", "queued", "running",
             "stalled"]]  # fmt: skip
    for j in snap["jobs"]:
        rows.append([f"  {j['id']}", j["name"], j["group"], j["user"], j["state"],
                     str(j["priority"]), format_readiness(j["readiness"]),
                     format_duration(j["queued_seconds"]), format_duration(j["running_seconds"]),
                     format_duration(j["stall_seconds"])])  # fmt: skip
    body = table(rows, left=5)
    lines.append(body[0] + "  waiting for")
    for line, j in zip(body[1:], snap["jobs"], strict=True):
        lines.append(f"{line}  {j['reason']}".rstrip() if j["reason"] else line)
    return lines
