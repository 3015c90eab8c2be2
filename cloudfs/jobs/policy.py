"""Which queued jobs start now, and why each other one waits. Pure: no I/O, no clock.

Every group has one queue, ordered by priority (higher first) then submission
(earlier first). Jobs are considered in that order across all groups. A job
starts when it fits its group's quota (or, for a group with ``borrow``, the
group's quota plus the other groups' idle quota) and its user's quota.

No job overtakes an earlier one of its queue that is blocked by the *group*
(its quota, or an unknown group), so a large job is not starved by small ones;
a job blocked by its *user's* quota holds back only that user's later jobs in
the queue. Running jobs are never preempted, so where groups borrow, a group
whose idle quota was lent waits for it to come back: all jobs together never
take more than the sum of the groups' quotas. A job asking more than a whole
quota waits (for the config to change) without holding anyone back.

The machine's capacity (``config.machine``) is one more limit on all jobs
together: a job that fits its quotas but not what the machine has free waits
("waiting for 2 GPUs on this machine (1 free)") and holds back its group's
queue like a group quota; one asking more than the whole machine waits without
holding anyone back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cloudfs.jobs.config import RESOURCES, Quota, SchedulerConfig
from cloudfs.jobs.machine import MACHINE_RESOURCES, Machine

Usage = dict[str, float]


@dataclass(frozen=True, slots=True)
class Demand:
    """What one job asks for, and where it queues."""

    job_id: str
    group: str
    user: str
    priority: int
    seq: int  # submission order
    gpus: float
    cpus: float
    memory: float

    def usage(self) -> Usage:
        return {"gpus": self.gpus, "cpus": self.cpus, "memory": self.memory, "jobs": 1}


@dataclass(frozen=True, slots=True)
class Plan:
    start: list[str]  # job ids, in the order to start them
    waiting: dict[str, str]  # job id -> why it waits


def order(jobs: Iterable[Demand]) -> list[Demand]:
    return sorted(jobs, key=lambda d: (-d.priority, d.seq))


def plan(queued: Iterable[Demand], running: Iterable[Demand], config: SchedulerConfig) -> Plan:
    by_group: dict[str, Usage] = defaultdict(_zero)
    by_user: dict[str, Usage] = defaultdict(_zero)
    on_machine = _zero()
    for d in running:
        _add(by_group[d.group], d)
        _add(by_user[d.user], d)
        _add(on_machine, d)
    start: list[str] = []
    waiting: dict[str, str] = {}
    blocked_groups: dict[str, str] = {}  # group -> the job holding its queue
    blocked_users: dict[tuple[str, str], str] = {}
    for d in order(queued):
        if d.group in blocked_groups:
            waiting[d.job_id] = f"behind job {blocked_groups[d.group]} in group {d.group}'s queue"
            continue
        if (d.group, d.user) in blocked_users:
            held = blocked_users[(d.group, d.user)]
            waiting[d.job_id] = f"behind job {held} of user {d.user}"
            continue
        group = config.groups.get(d.group)
        if group is None:
            waiting[d.job_id] = f"unknown group {d.group!r} (not in the scheduler config)"
            blocked_groups[d.group] = d.job_id
            continue
        too_big = _short_of_machine(_zero(), d, config.machine)
        if too_big:  # waits for a bigger machine (a config change), holding nobody back
            waiting[d.job_id] = f"more than this machine has: {too_big}"
            continue
        never = "" if group.borrow else _short(_zero(), d, group.quota)
        if never:  # waits for a config change, holding nobody back
            waiting[d.job_id] = f"group {d.group} quota: {never}: more than the whole quota"
            continue
        short = _short(by_group[d.group], d, group.quota)
        if short and group.borrow:
            short = _short_of_idle(d, by_group, config)
        if not short and any(g.borrow for g in config.groups.values()):
            short = _short_of_pool(d, by_group, config)
        if short:
            waiting[d.job_id] = f"group {d.group} quota: {short}"
            blocked_groups[d.group] = d.job_id
            continue
        user_quota = config.users.get(d.user)
        never = _short(_zero(), d, user_quota) if user_quota else ""
        if never:
            waiting[d.job_id] = f"user {d.user} quota: {never}: more than the whole quota"
            continue
        short = _short(by_user[d.user], d, user_quota) if user_quota else ""
        if short:
            waiting[d.job_id] = f"user {d.user} quota: {short}"
            blocked_users[(d.group, d.user)] = d.job_id
            continue
        short = _short_of_machine(on_machine, d, config.machine)
        if short:
            waiting[d.job_id] = short
            blocked_groups[d.group] = d.job_id
            continue
        start.append(d.job_id)
        _add(by_group[d.group], d)
        _add(by_user[d.user], d)
        _add(on_machine, d)
    return Plan(start, waiting)


def _zero() -> Usage:
    return dict.fromkeys(RESOURCES, 0.0)


def _add(usage: Usage, d: Demand) -> None:
    for r, v in d.usage().items():
        usage[r] += v


def _short(used: Mapping[str, float], d: Demand, quota: Quota) -> str:
    """What ``d`` would exceed in ``quota`` on top of ``used`` ("" if nothing)."""
    for r, want in d.usage().items():
        limit = quota.limit(r)
        if limit is not None and used[r] + want > limit:
            return f"{r} {_fmt(used[r])} in use + {_fmt(want)} asked > {_fmt(limit)}"
    return ""


_NAMES = {"gpus": "GPUs", "cpus": "CPUs", "memory": "memory"}


def _short_of_machine(used: Mapping[str, float], d: Demand, machine: Machine) -> str:
    """What ``d`` would exceed of the machine's capacity on top of ``used`` ("" if nothing):
    with nothing used, what it asks past the whole machine."""
    usage = d.usage()
    for r in MACHINE_RESOURCES:
        limit, want = machine.limit(r), usage[r]
        if limit is None or used[r] + want <= limit:
            continue
        if not any(used.values()):
            return f"{_fmt(want)} {_NAMES[r]} asked, the machine has {_fmt(limit)}"
        free = max(0.0, limit - used[r])
        return f"waiting for {_fmt(want)} {_NAMES[r]} on this machine ({_fmt(free)} free)"
    return ""


def _short_of_idle(d: Demand, by_group: Mapping[str, Usage], config: SchedulerConfig) -> str:
    """For a borrowing group: what the excess over its quota would exceed in the other
    groups' idle quota (what they leave unused, less what other groups borrowed already)."""
    own = config.groups[d.group].quota
    for r, want in d.usage().items():
        limit = own.limit(r)
        if limit is None:
            continue
        excess = by_group[d.group][r] + want - limit
        if excess <= 0:
            continue
        idle = 0.0
        for name, g in config.groups.items():
            lim = g.quota.limit(r)
            if name == d.group or lim is None:
                continue
            used = by_group[name][r] if name in by_group else 0.0
            idle += max(0.0, lim - used)  # a borrower over its quota lends nothing...
        borrowed = sum(
            max(0.0, u[r] - (config.groups[n].quota.limit(r) or 0.0))
            for n, u in by_group.items()
            if n != d.group and n in config.groups and config.groups[n].quota.limit(r) is not None
        )  # ...and what others borrowed is taken
        if excess > idle - borrowed:
            return f"{r} {_fmt(excess)} past the quota, {_fmt(max(0.0, idle - borrowed))} idle"
    return ""


def _short_of_pool(d: Demand, by_group: Mapping[str, Usage], config: SchedulerConfig) -> str:
    """Where groups borrow, no job may take the sum of all quotas past itself: a lender
    waits for what it lent to come back (nothing is preempted)."""
    for r, want in d.usage().items():
        limits = [g.quota.limit(r) for g in config.groups.values()]
        if any(limit is None for limit in limits):
            continue
        pool = sum(limit for limit in limits if limit is not None)
        used = sum(u[r] for n, u in by_group.items() if n in config.groups)
        if used + want > pool:
            return f"{r} lent to other groups ({_fmt(used)} of all groups' {_fmt(pool)} in use)"
    return ""


def _fmt(value: float) -> str:
    return f"{value:g}" if value < 1 << 20 else f"{value / (1 << 30):.1f}G"
