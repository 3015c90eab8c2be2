"""Requested and used resources, time queued and time stalled on data: per group,
user and job. Pure over the records, plus one look at live processes' usage."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from cloudfs.jobs import procs, runner
from cloudfs.jobs.config import RESOURCES, SchedulerConfig
from cloudfs.jobs.machine import MACHINE_RESOURCES
from cloudfs.jobs.policy import Demand
from cloudfs.jobs.record import ADMITTED, QUEUED, RETRYING, RUNNING, JobRecord


def demand(record: JobRecord) -> dict[str, float]:
    job, n = record.spec, record.spec.workers
    d = Demand(record.id, job.group, job.user, job.priority, record.seq,
               n * job.resources.gpus, n * job.resources.cpu, n * job.resources.memory)  # fmt: skip
    return d.usage()


def build(records: list[JobRecord], config: SchedulerConfig, jobs_dir: Path) -> dict[str, Any]:
    """``{"groups": {...}, "users": {...}, "jobs": [...], "machine": {...}}``; a group's
    or user's ``requested`` counts its queued and admitted jobs, ``allocated`` the
    admitted; ``machine`` is the capacity, what admitted jobs hold of it, and the GPU
    indices each started job holds."""
    now = time.time()
    groups: dict[str, dict[str, Any]] = defaultdict(_bucket)
    users: dict[str, dict[str, Any]] = defaultdict(_bucket)
    jobs = []
    machine: dict[str, Any] = {
        "capacity": config.machine.as_dict(),
        "allocated": dict.fromkeys(MACHINE_RESOURCES, 0.0),
        "devices": {},
    }
    for r in records:
        want = demand(r)
        queued = r.queued_seconds + (now - r.queued_since if r.state == QUEUED else 0.0)
        for bucket in (groups[r.spec.group], users[r.spec.user]):
            bucket["jobs"][r.state] = bucket["jobs"].get(r.state, 0) + 1
            bucket["queued_seconds"] += queued
            bucket["stall_seconds"] += r.stall_seconds
            if r.state in ADMITTED or r.state in (QUEUED, RETRYING):
                _add(bucket["requested"], want)
            if r.state in ADMITTED:
                _add(bucket["allocated"], want)
        if r.state in ADMITTED:
            for k in MACHINE_RESOURCES:
                machine["allocated"][k] += want[k]
        if r.devices:
            machine["devices"][r.id] = r.devices
        used: dict[str, float] = {}
        if r.state == RUNNING:
            directory = runner.attempt_dir(jobs_dir, r.id, r.attempt)
            cpu_seconds, rss = procs.usage(runner.roots(directory))
            elapsed = max(now - r.attempt_started_at, 1e-9)
            used = {"cpus": round(cpu_seconds / elapsed, 2), "memory": rss}
        jobs.append({
            "id": r.id, "group": r.spec.group, "user": r.spec.user, "state": r.state,
            "requested": want, "used": used, "queued_seconds": round(queued, 1),
            "stall_seconds": round(r.stall_seconds, 1), "devices": r.devices,
        })  # fmt: skip
    for name, group in config.groups.items():
        groups[name]["quota"] = {k: group.quota.limit(k) for k in RESOURCES}
    for name, quota in config.users.items():
        users[name]["quota"] = {k: quota.limit(k) for k in RESOURCES}
    return {"groups": dict(groups), "users": dict(users), "jobs": jobs, "machine": machine}


def _bucket() -> dict[str, Any]:
    zero = dict.fromkeys(RESOURCES, 0.0)
    return {"requested": dict(zero), "allocated": dict(zero), "jobs": {}, "queued_seconds": 0.0,
            "stall_seconds": 0.0, "quota": {}}  # fmt: skip


def _add(into: dict[str, float], value: dict[str, float]) -> None:
    for k, v in value.items():
        into[k] += v
