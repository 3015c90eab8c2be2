"""The scheduler's groups and quotas, from ``scheduler.yaml``::

    groups:
      vision:   {quota: {gpus: 8, cpus: 64, memory: 256G, jobs: 4}, borrow: true}
      research: {quota: {gpus: 2, jobs: 2}}
    users:
      alice: {quota: {gpus: 4}}
    machine: {gpus: 4, cpus: 32, memory: 256G}

A quota left out (or a resource left out of one) is unlimited. A group with
``borrow: true`` may go past its own quota into the idle part of the other
groups' quotas (what they have but do not use); without it, never. Without a
config file there is one group, ``default``, without limits. ``machine`` is
the capacity all jobs together may take; what it leaves out the scheduler finds
on the machine (``cloudfs.jobs.machine``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cloudfs.jobs import fields as f
from cloudfs.jobs.fields import SpecError
from cloudfs.jobs.machine import MACHINE_RESOURCES, Machine

RESOURCES = ("gpus", "cpus", "memory", "jobs")


@dataclass(frozen=True, slots=True)
class Quota:
    """Limits per resource; ``None``: unlimited."""

    gpus: float | None = None
    cpus: float | None = None
    memory: float | None = None
    jobs: float | None = None

    def limit(self, resource: str) -> float | None:
        value: float | None = getattr(self, resource)
        return value


@dataclass(frozen=True, slots=True)
class Group:
    quota: Quota = field(default_factory=Quota)
    borrow: bool = False


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    groups: dict[str, Group] = field(default_factory=lambda: {"default": Group()})
    users: dict[str, Quota] = field(default_factory=dict)
    machine: Machine = field(default_factory=Machine)


def load_file(path: Path) -> SchedulerConfig:
    """The config at ``path``; the default one if it does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return SchedulerConfig()
    except OSError as e:
        raise SpecError(f"{path}: {e.strerror}") from None
    try:
        return parse(yaml.safe_load(text))
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: not valid YAML: {getattr(e, 'problem', e)}") from None
    except SpecError as e:
        raise SpecError(f"{path}: {e}") from None


def parse(raw: Any) -> SchedulerConfig:
    top = f.mapping(raw, "config")
    f.no_unknown(top, {"groups", "users", "machine"}, "")
    groups: dict[str, Group] = {}
    for name, value in f.mapping(top.get("groups"), "groups").items():
        path = f"groups.{name}"
        g = f.mapping(value, path)
        f.no_unknown(g, {"quota", "borrow"}, path)
        borrow = g.get("borrow", False)
        if not isinstance(borrow, bool):
            raise SpecError(f"{path}.borrow: must be true or false")
        groups[str(name)] = Group(_quota(g.get("quota"), f"{path}.quota"), borrow)
    users: dict[str, Quota] = {}
    for name, value in f.mapping(top.get("users"), "users").items():
        path = f"users.{name}"
        u = f.mapping(value, path)
        f.no_unknown(u, {"quota"}, path)
        users[str(name)] = _quota(u.get("quota"), f"{path}.quota")
    machine = _machine(top.get("machine"), "machine")
    return SchedulerConfig(groups or {"default": Group()}, users, machine)


def _machine(value: Any, path: str) -> Machine:
    m = f.mapping(value, path)
    f.no_unknown(m, set(MACHINE_RESOURCES), path)
    return Machine(
        gpus=None if m.get("gpus") is None else f.whole(m["gpus"], f"{path}.gpus"),
        cpus=None if m.get("cpus") is None else f.number(m["cpus"], f"{path}.cpus"),
        memory=None if m.get("memory") is None else f.size(m["memory"], f"{path}.memory"),
    )


def _quota(value: Any, path: str) -> Quota:
    q = f.mapping(value, path)
    f.no_unknown(q, set(RESOURCES), path)
    return Quota(
        gpus=None if q.get("gpus") is None else f.whole(q["gpus"], f"{path}.gpus"),
        cpus=None if q.get("cpus") is None else f.number(q["cpus"], f"{path}.cpus"),
        memory=None if q.get("memory") is None else f.size(q["memory"], f"{path}.memory"),
        jobs=None if q.get("jobs") is None else f.whole(q["jobs"], f"{path}.jobs"),
    )
