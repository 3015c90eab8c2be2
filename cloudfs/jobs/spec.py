"""A job spec: what to run, on how many workers, reading which CloudFS data.

Parsed from YAML and validated field by field; a bad field raises
``SpecError("workers.resources.gpus: must be a whole number ≥ 0")``. Example::

    name: resnet
    group: vision            # resource group (queue and quota); default "default"
    user: alice              # default: the submitting user
    command: [python3, train.py]
    framework: torchrun      # command | torchrun | horovod
    workers:
      count: 2
      resources: {cpu: 4, memory: 16G, gpus: 1}
    volumes:
      - {uri: s3://bucket/imagenet, mount: /mnt/imagenet, options: [--read-only]}
    datasets: [/mnt/imagenet/train]
    readiness: {min_cached: 0.8, timeout: 3600}   # or: readiness: now
    retries: 2
    priority: 10
"""

from __future__ import annotations

import os
import posixpath
import pwd
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from cloudfs.jobs import fields as f
from cloudfs.jobs.fields import SpecError

FRAMEWORKS = ("command", "torchrun", "horovod")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_FIELDS = {
    "name", "group", "user", "image", "command", "framework", "workers", "volumes",
    "datasets", "readiness", "retries", "retry_backoff", "priority", "env", "max_runtime",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Resources:
    cpu: float = 1.0
    memory: int = 0  # bytes
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class Volume:
    uri: str  # what to mount (s3://, file://, grpc://...), or "" to use an existing mount
    mount: str  # where: an absolute path
    options: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    command: tuple[str, ...]
    group: str = "default"
    user: str = ""
    image: str = ""  # for the Kubernetes scheduler; the embedded one runs ``command``
    framework: str = "command"
    workers: int = 1
    resources: Resources = field(default_factory=Resources)
    volumes: tuple[Volume, ...] = ()
    datasets: tuple[str, ...] = ()
    min_cached: float = 0.0  # fraction of the datasets cached before the job starts
    readiness_timeout: float = 3600.0
    retries: int = 0
    retry_backoff: float = 10.0  # seconds, doubled after each failed attempt
    priority: int = 0
    env: tuple[tuple[str, str], ...] = ()
    max_runtime: float = 0.0  # seconds; 0: no limit (a longer attempt is a hang: killed)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> JobSpec:
        return JobSpec(
            **{
                **data,
                "command": tuple(data["command"]),
                "resources": Resources(**data["resources"]),
                "volumes": tuple(
                    Volume(v["uri"], v["mount"], tuple(v["options"])) for v in data["volumes"]
                ),
                "datasets": tuple(data["datasets"]),
                "env": tuple((k, v) for k, v in data["env"]),
            }
        )


def load(text: str, *, default_user: str | None = None) -> JobSpec:
    """The spec in YAML ``text``; ``SpecError`` naming the first bad field."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError(f"not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    return parse(raw, default_user=default_user)


def parse(raw: Any, *, default_user: str | None = None) -> JobSpec:
    top = f.mapping(raw, "spec")
    if not top:
        raise SpecError("spec: empty (a job needs at least name and command)")
    f.no_unknown(top, _FIELDS, "")
    name = f.string(top.get("name"), "name")
    if not _NAME.match(name):
        raise SpecError("name: lower-case letters, digits, '.', '_' and '-', at most 63")
    image = f.string(top["image"], "image") if top.get("image") is not None else ""
    command = _command(top.get("command"))
    if not command and not image:
        raise SpecError("command: required (or image, for the Kubernetes scheduler)")
    framework = f.string(top.get("framework"), "framework", default="command")
    if framework not in FRAMEWORKS:
        raise SpecError(f"framework: must be one of {', '.join(FRAMEWORKS)}")
    count, resources = _workers(top.get("workers"))
    volumes = _volumes(top.get("volumes"))
    datasets = tuple(_dataset(p, i, volumes) for i, p in enumerate(_list(top, "datasets")))
    min_cached, timeout = _readiness(top.get("readiness"))
    if min_cached > 0 and not datasets:
        raise SpecError("readiness: a threshold needs datasets to measure it on")
    return JobSpec(
        name=name,
        command=command,
        group=f.string(top.get("group"), "group", default="default"),
        user=f.string(top.get("user"), "user", default=default_user or _current_user()),
        image=image,
        framework=framework,
        workers=count,
        resources=resources,
        volumes=volumes,
        datasets=datasets,
        min_cached=min_cached,
        readiness_timeout=timeout,
        retries=f.whole(top.get("retries"), "retries", default=0),
        retry_backoff=f.number(top.get("retry_backoff"), "retry_backoff", default=10.0),
        priority=_priority(top.get("priority")),
        env=_env(top.get("env")),
        max_runtime=f.number(top.get("max_runtime"), "max_runtime", default=0.0),
    )


def _current_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _list(top: Any, key: str) -> list[Any]:
    value = top.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(f"{key}: must be a list")
    return value


def _command(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) and value.strip():
        return ("/bin/sh", "-c", value)
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise SpecError("command: must be a string (run by /bin/sh) or a list of arguments")


def _workers(value: Any) -> tuple[int, Resources]:
    if isinstance(value, int) and not isinstance(value, bool):
        return f.whole(value, "workers", minimum=1), Resources()
    top = f.mapping(value, "workers")
    f.no_unknown(top, {"count", "resources"}, "workers")
    count = f.whole(top.get("count"), "workers.count", default=1, minimum=1)
    res = f.mapping(top.get("resources"), "workers.resources")
    f.no_unknown(res, {"cpu", "memory", "gpus"}, "workers.resources")
    cpu = f.number(res.get("cpu"), "workers.resources.cpu", default=1.0)
    memory = f.size(res.get("memory"), "workers.resources.memory", default=0)
    gpus = f.whole(res.get("gpus"), "workers.resources.gpus", default=0)
    return count, Resources(cpu, memory, gpus)


def _volumes(value: Any) -> tuple[Volume, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SpecError("volumes: must be a list")
    volumes: list[Volume] = []
    for i, item in enumerate(value):
        path = f"volumes[{i}]"
        v = f.mapping(item, path)
        f.no_unknown(v, {"uri", "mount", "options"}, path)
        mount = f.string(v.get("mount"), f"{path}.mount")
        if not posixpath.isabs(mount):
            raise SpecError(f"{path}.mount: must be an absolute path")
        uri = f.string(v["uri"], f"{path}.uri") if v.get("uri") is not None else ""
        if uri and "://" not in uri:
            raise SpecError(f"{path}.uri: must be a URI like s3://bucket/prefix or file:///dir")
        options = tuple(f.string_list(v.get("options"), f"{path}.options"))
        volumes.append(Volume(uri, posixpath.normpath(mount), options))
    mounts = [v.mount for v in volumes]
    if len(set(mounts)) != len(mounts):
        raise SpecError("volumes: two volumes mount at the same path")
    return tuple(volumes)


def _dataset(value: Any, i: int, volumes: tuple[Volume, ...]) -> str:
    path = f.string(value, f"datasets[{i}]")
    if not posixpath.isabs(path):
        raise SpecError(f"datasets[{i}]: must be an absolute path")
    norm = posixpath.normpath(path)
    if not any(norm == v.mount or norm.startswith(v.mount.rstrip("/") + "/") for v in volumes):
        raise SpecError(f"datasets[{i}]: {path} is not under any of the job's volumes")
    return norm


def _readiness(value: Any) -> tuple[float, float]:
    if value is None or value == "now":
        return 0.0, 3600.0
    top = f.mapping(value, "readiness")
    f.no_unknown(top, {"min_cached", "timeout"}, "readiness")
    share = f.number(top.get("min_cached"), "readiness.min_cached", default=0.0)
    if share > 1:
        raise SpecError("readiness.min_cached: must be a fraction between 0 and 1 (0.8: 80%)")
    timeout = f.number(top.get("timeout"), "readiness.timeout", default=3600.0, minimum=1)
    return share, timeout


def _priority(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError("priority: must be a whole number (higher runs first)")
    return value


def _env(value: Any) -> tuple[tuple[str, str], ...]:
    top = f.mapping(value, "env")
    out: list[tuple[str, str]] = []
    for key, val in top.items():
        if not isinstance(key, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise SpecError(f"env.{key}: not a valid variable name")
        if not isinstance(val, (str, int, float)) or isinstance(val, bool):
            raise SpecError(f"env.{key}: must be a string or a number")
        out.append((key, str(val)))
    return tuple(out)
