"""The injected objects: one native sidecar per CloudFS volume, its cache and secret volumes.

Each sidecar is an init container with ``restartPolicy: Always`` (a native
sidecar: started before the app containers, stopped after them) running
``cloudfs mount URI /cloudfs/mnt/VOLUME --foreground ...``. The pod volume
(the PVC or inline CSI volume) becomes an ``emptyDir`` of the same name: the
sidecar mounts it at ``/cloudfs/mnt/VOLUME`` with ``Bidirectional``
propagation and mounts CloudFS on top, which the app containers see through
their own mounts of it (``HostToContainer``, ``patch.py``). Kubernetes allows
``Bidirectional`` only in a privileged container, which also gives it
``/dev/fuse``: that is the least FUSE needs here.

Its startup probe (``cloudfs sidecar probe``) passes once the mount answers, so
the app containers start only then. A sidecar that dies (killed for memory) is
restarted by kubelet; ``--take-over-dead-mount`` then detaches the dead mount and
mounts in its place, which the app containers see (files they held open stay
broken; new opens work). Secrets reach it as files of a Secret
volume (tokens, TLS) and as ``secretKeyRef`` environment (``AWS_*``...), never
as values in the pod spec. The cache is one ``emptyDir`` (``cloudfs-cache``)
whose ``sizeLimit`` covers every volume's cache and write-back staging, or a
node directory where the webhook allows one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from cloudfs.errors import UsageError
from cloudfs.k8s import csi_names
from cloudfs.sidecar.errors import Refused
from cloudfs.sidecar.settings import PodSettings, WebhookConfig
from cloudfs.sidecar.volumes import SidecarVolume
from cloudfs.sizes import format_quantity, parse_quantity, parse_seconds

T = TypeVar("T", int, float)

MOUNT_ROOT = "/cloudfs/mnt"
CACHE_ROOT = "/cloudfs/cache"
SECRET_ROOT = "/cloudfs/secrets"
CACHE_VOLUME = "cloudfs-cache"
CONTAINER_PREFIX = "cloudfs-"
SECRET_PREFIX = "cloudfs-secret-"
MARGIN = 512 << 20  # per volume, beyond its cache and staging: the tree cache, journal, log
MEMORY_OVERHEAD = 384 << 20  # the client beside its memory cache
DEFAULT_MEMORY_CACHE = 256 << 20  # `cloudfs mount --memory-cache-size`'s default
DEFAULT_CPU = "250m"
STARTUP_SECONDS = 300  # how long a mount may take to answer before the pod fails
GRACE_MARGIN = 30  # seconds of the pod's grace period beyond the drain


@dataclass(frozen=True, slots=True)
class Injection:
    """What the patch adds: the sidecars (in order), the pod volumes, the grace period."""

    sidecars: list[dict[str, Any]]
    volumes: list[dict[str, Any]]
    grace_seconds: int | None  # the pod's terminationGracePeriodSeconds at least this


def dns_name(prefix: str, name: str) -> str:
    """``prefix + name`` as a DNS label (63 characters at most; a hash keeps long ones apart)."""
    full = prefix + name
    if len(full) <= 63:
        return full
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{full[: 63 - 9]}-{digest}"


def mount_path(volume: SidecarVolume) -> str:
    return f"{MOUNT_ROOT}/{volume.name}"


def build(volumes: list[SidecarVolume], settings: PodSettings, config: WebhookConfig) -> Injection:
    image = settings.image or config.image
    sidecars = []
    cache_bytes = 0
    writes_back = False
    drain = settings.drain_timeout if settings.drain_timeout is not None else config.drain_timeout
    for volume in volumes:
        plan = _Plan(volume, settings, config, drain)
        sidecars.append(plan.container(image))
        cache_bytes += plan.disk_bytes + MARGIN
        writes_back = writes_back or plan.writes_back
    pod_volumes = [_cache_volume(settings, cache_bytes)]
    for volume in volumes:
        if volume.secret:
            pod_volumes.append({
                "name": dns_name(SECRET_PREFIX, volume.name),
                "secret": {"secretName": volume.secret, "defaultMode": 0o400},
            })  # fmt: skip
    grace = int(drain) + GRACE_MARGIN if writes_back else None
    return Injection(sidecars, pod_volumes, grace)


def _cache_volume(settings: PodSettings, size: int) -> dict[str, Any]:
    if settings.cache_host_path:
        return {
            "name": CACHE_VOLUME,
            "hostPath": {"path": settings.cache_host_path, "type": "DirectoryOrCreate"},
        }
    empty: dict[str, Any] = {"sizeLimit": format_quantity(size)}
    if settings.cache_medium:
        empty["medium"] = settings.cache_medium
    return {"name": CACHE_VOLUME, "emptyDir": empty}


class _Plan:
    """One volume's sidecar: its command line, environment and mounts."""

    def __init__(
        self, volume: SidecarVolume, settings: PodSettings, config: WebhookConfig, drain: float
    ) -> None:
        self.volume = volume
        options = list(volume.options)
        if settings.cache_size is not None:  # the pod's annotation beats the volume's option
            options = [o for o in options if not o.startswith("cache_size=")]
        self.options = options
        self.cache_size = (
            settings.cache_size
            if settings.cache_size is not None
            else _size(volume, "cache_size", config.cache_size)
        )
        self.writes_back = not volume.read_only and volume.option("write_mode") == "back"
        staging = _size(volume, "staging_size", 0)
        if self.writes_back and not staging:
            staging = self.cache_size  # bounded, so writers wait instead of the pod's eviction
            self.options.append(f"staging_size={staging}")
        self.disk_bytes = self.cache_size + (staging if not volume.read_only else 0)
        self.memory = _size(volume, "memory_cache_size", DEFAULT_MEMORY_CACHE)
        self.drain = _seconds(volume, "drain_timeout", drain)
        self.settings = settings

    def secret_file(self, keys: tuple[str, ...]) -> str | None:
        key = next((k for k in keys if k in self.volume.secret_keys), None)
        return f"{SECRET_ROOT}/{self.volume.name}/{key}" if key else None

    def command(self) -> list[str]:
        volume = self.volume
        cmd = [
            "cloudfs", "mount", volume.uri, mount_path(volume), "--foreground", "--allow-other",
            "--take-over-dead-mount",
            "--cache-dir", f"{CACHE_ROOT}/{volume.name}", "--cache-size", str(self.cache_size),
        ]  # fmt: skip
        if volume.read_only:
            cmd.append("--read-only")
        else:
            cmd += ["--drain-timeout", f"{self.drain:g}"]
        for flag, keys in (
            ("--token-file", csi_names.TOKEN_KEYS),
            ("--cache-token-file", csi_names.CACHE_TOKEN_KEYS),
            ("--tls-ca", csi_names.TLS_CA_KEYS),
            ("--tls-cert", csi_names.TLS_CERT_KEYS),
            ("--tls-key", csi_names.TLS_KEY_KEYS),
        ):
            if path := self.secret_file(keys):
                cmd += [flag, path]
        cmd += volume.cache_group
        if self.options:
            cmd += ["-o", ",".join(self.options)]
        return cmd

    def container(self, image: str) -> dict[str, Any]:
        volume = self.volume
        mounts: list[dict[str, Any]] = [
            {"name": volume.name, "mountPath": mount_path(volume),
             "mountPropagation": "Bidirectional"},
            {"name": CACHE_VOLUME, "mountPath": f"{CACHE_ROOT}/{volume.name}",
             "subPath": volume.name},
        ]  # fmt: skip
        if volume.secret:
            mounts.append({
                "name": dns_name(SECRET_PREFIX, volume.name),
                "mountPath": f"{SECRET_ROOT}/{volume.name}", "readOnly": True,
            })  # fmt: skip
        env = [
            {"name": key, "valueFrom": {"secretKeyRef": {"name": volume.secret, "key": key}}}
            for key in csi_names.env_keys(volume.secret_keys)
        ]
        memory = self.settings.memory or format_quantity(self.memory + MEMORY_OVERHEAD)
        resources: dict[str, Any] = {
            "requests": {"cpu": self.settings.cpu or DEFAULT_CPU, "memory": memory}
        }
        if self.settings.memory:
            resources["limits"] = {"memory": self.settings.memory}
        container: dict[str, Any] = {
            "name": dns_name(CONTAINER_PREFIX, volume.name),
            "image": image,
            "command": self.command(),
            "restartPolicy": "Always",
            # root and privileged whatever the pod says: FUSE and Bidirectional need both
            "securityContext": {"privileged": True, "runAsUser": 0, "runAsNonRoot": False},
            "volumeMounts": mounts,
            "resources": resources,
            "startupProbe": {
                "exec": {"command": ["cloudfs", "sidecar", "probe", mount_path(volume)]},
                "periodSeconds": 1,
                "timeoutSeconds": 5,
                "failureThreshold": STARTUP_SECONDS,
            },
        }
        if env:
            container["env"] = env
        return container


def _size(volume: SidecarVolume, option: str, default: int) -> int:
    return _checked(volume, option, parse_quantity, default)


def _seconds(volume: SidecarVolume, option: str, default: float) -> float:
    return _checked(volume, option, parse_seconds, default)


def _checked(volume: SidecarVolume, option: str, parse: Callable[[str], T], default: T) -> T:
    """The value of a volume's ``-o option=...`` (``default`` without one); a bad one is
    refused now rather than by the mount when the pod starts."""
    text = volume.option(option)
    try:
        return parse(text) if text else default
    except UsageError as exc:
        raise Refused(
            f"volume {volume.name} ({volume.source}): mount option {option}: {exc}"
        ) from None
