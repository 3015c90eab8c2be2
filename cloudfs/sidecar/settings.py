"""What a pod says to the webhook (the opt-in label, its annotations) and the webhook's own
settings (its flags).

A pod asks with the label ``cloudfs.io/inject: "true"`` (the label is what the
MutatingWebhookConfiguration's ``objectSelector`` sees; the same annotation is
honoured where a webhook is configured without the selector). The annotations,
all optional:

    cloudfs.io/inject-volumes   vol1,vol2: only these pod volumes (default: every
                                CloudFS volume of the pod); a name that is not a
                                CloudFS volume of the pod is refused
    cloudfs.io/secret           the Secret, in the pod's namespace, of every volume
                                (default: the PV's nodeStageSecretRef name, which
                                must then be in the pod's namespace)
    cloudfs.io/cache-size       disk cache per volume, e.g. 20Gi (default: the
                                volume's cache_size mount option, else --cache-size)
    cloudfs.io/cache-medium     Memory: the cache emptyDir in RAM (counts against
                                the pod's memory)
    cloudfs.io/cache-host-path  a node directory for the cache instead of an
                                emptyDir, under one of the webhook's --cache-host-paths
    cloudfs.io/drain-timeout    seconds a write-back sidecar waits for uploads at the
                                end of the pod (default: --drain-timeout)
    cloudfs.io/sidecar-image    the client's image (default: --image)
    cloudfs.io/sidecar-cpu, cloudfs.io/sidecar-memory
                                the sidecar's requests (and limits: memory only)

The webhook writes ``cloudfs.io/injected`` (the volumes its sidecars serve),
or ``cloudfs.io/inject-status`` when it admitted a pod without injecting.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from cloudfs.errors import UsageError
from cloudfs.sidecar.errors import Refused
from cloudfs.sizes import parse_quantity, parse_seconds

INJECT = "cloudfs.io/inject"
VOLUMES = "cloudfs.io/inject-volumes"
SECRET = "cloudfs.io/secret"
CACHE_SIZE = "cloudfs.io/cache-size"
CACHE_MEDIUM = "cloudfs.io/cache-medium"
CACHE_HOST_PATH = "cloudfs.io/cache-host-path"
DRAIN_TIMEOUT = "cloudfs.io/drain-timeout"
IMAGE = "cloudfs.io/sidecar-image"
CPU = "cloudfs.io/sidecar-cpu"
MEMORY = "cloudfs.io/sidecar-memory"
INJECTED = "cloudfs.io/injected"
STATUS = "cloudfs.io/inject-status"

T = TypeVar("T")

DEFAULT_CACHE_SIZE = 10 << 30  # `cloudfs mount --cache-size`'s own default
DEFAULT_DRAIN_TIMEOUT = 600.0  # and --drain-timeout's


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """The webhook's flags (``cloudfs sidecar webhook``)."""

    image: str
    driver: str = "csi.cloudfs.io"
    native_sidecars: str = "auto"  # auto: ask the API server's version; yes; no
    on_error: str = "refuse"  # or "admit": the pod runs without injection, with an event
    cache_host_paths: tuple[str, ...] = ()  # node directories a pod may put its cache under
    cache_size: int = DEFAULT_CACHE_SIZE
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT


@dataclass(frozen=True, slots=True)
class PodSettings:
    """A pod's annotations, checked."""

    volumes: tuple[str, ...] = ()  # empty: every CloudFS volume
    secret: str | None = None
    cache_size: int | None = None
    cache_medium: str = ""
    cache_host_path: str | None = None
    drain_timeout: float | None = None
    image: str | None = None
    cpu: str | None = None
    memory: str | None = None


def pod_annotations(pod: dict[str, Any]) -> dict[str, str]:
    raw = (pod.get("metadata") or {}).get("annotations") or {}
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}


def pod_labels(pod: dict[str, Any]) -> dict[str, str]:
    raw = (pod.get("metadata") or {}).get("labels") or {}
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}


def asks_for_injection(pod: dict[str, Any]) -> bool:
    """The label (or annotation) ``cloudfs.io/inject`` is ``true``."""
    return "true" in (
        pod_labels(pod).get(INJECT, "").lower(),
        pod_annotations(pod).get(INJECT, "").lower(),
    )


def pod_settings(pod: dict[str, Any], config: WebhookConfig) -> PodSettings:
    """The pod's annotations, each checked; ``Refused`` names the first one that is wrong."""
    notes = pod_annotations(pod)
    medium = notes.get(CACHE_MEDIUM, "")
    if medium not in ("", "Memory"):
        raise Refused(f"annotation {CACHE_MEDIUM}: {medium!r} is not Memory (or empty: disk)")
    host_path = notes.get(CACHE_HOST_PATH)
    if host_path is not None:
        host_path = _allowed_host_path(host_path, config.cache_host_paths)
        if medium:
            raise Refused(f"annotations {CACHE_HOST_PATH} and {CACHE_MEDIUM} do not go together")
    cache_size = _parsed(notes, CACHE_SIZE, parse_quantity)
    drain = _parsed(notes, DRAIN_TIMEOUT, parse_seconds)
    for key in (CPU, MEMORY):
        if key in notes and not _is_quantity(notes[key]):
            raise Refused(f"annotation {key}: {notes[key]!r} is not a Kubernetes quantity")
    return PodSettings(
        volumes=tuple(v.strip() for v in notes.get(VOLUMES, "").split(",") if v.strip()),
        secret=notes.get(SECRET) or None,
        cache_size=cache_size,
        cache_medium=medium,
        cache_host_path=host_path,
        drain_timeout=drain,
        image=notes.get(IMAGE) or None,
        cpu=notes.get(CPU),
        memory=notes.get(MEMORY),
    )


def _parsed(notes: dict[str, str], key: str, parse: Callable[[str], T]) -> T | None:
    if key not in notes:
        return None
    try:
        return parse(notes[key])
    except UsageError as exc:
        raise Refused(f"annotation {key}: {exc}") from None


def _allowed_host_path(path: str, allowed: tuple[str, ...]) -> str:
    if not os.path.isabs(path) or "\0" in path:
        raise Refused(f"annotation {CACHE_HOST_PATH}: {path!r} is not an absolute path")
    path = os.path.normpath(path)
    for prefix in allowed:
        if os.path.commonpath([path, prefix]) == prefix:
            return path
    where = ", ".join(allowed) if allowed else "none: the webhook has no --cache-host-paths"
    raise Refused(f"annotation {CACHE_HOST_PATH}: {path} is not under an allowed one ({where})")


def _is_quantity(text: str) -> bool:
    """A Kubernetes quantity: a number, an optional binary/decimal suffix (no exponents)."""
    number = text.rstrip("KMGTPEkimun")
    suffix = text[len(number) :]
    if suffix not in ("", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        return False
    try:
        return float(number) >= 0 and number.strip() == number and bool(number)
    except ValueError:
        return False
