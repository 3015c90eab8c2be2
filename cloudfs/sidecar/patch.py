"""The pod as the webhook returns it, and the JSONPatch (RFC 6902) that makes it.

The patch replaces whole fields (``add`` on an existing member replaces it), each
computed from the pod the API server sent: ``/spec/volumes`` (the CloudFS
volumes become ``emptyDir``s of the same name; the cache and secret volumes
added), ``/spec/initContainers`` (the sidecars first, so init containers that
follow see the mounts), ``/spec/containers`` (``HostToContainer`` on every
mount of a served volume), ``/spec/terminationGracePeriodSeconds`` (raised to
cover a write-back drain) and ``/metadata/annotations`` (``cloudfs.io/injected``).
A pod that already has them is left alone (``already_injected``).
"""

from __future__ import annotations

import copy
from typing import Any

from cloudfs.sidecar.containers import CONTAINER_PREFIX, Injection
from cloudfs.sidecar.errors import Refused
from cloudfs.sidecar.settings import INJECTED
from cloudfs.sidecar.volumes import SidecarVolume

DEFAULT_GRACE = 30  # Kubernetes' default terminationGracePeriodSeconds
PROBE = ["cloudfs", "sidecar", "probe"]


def already_injected(pod: dict[str, Any]) -> bool:
    """The pod carries our annotation or one of our sidecars (a second call, a re-invocation,
    a pod created from an already-patched template)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if INJECTED in annotations:
        return True
    for container in (pod.get("spec") or {}).get("initContainers") or []:
        probe = ((container.get("startupProbe") or {}).get("exec") or {}).get("command") or []
        if str(container.get("name", "")).startswith(CONTAINER_PREFIX) and probe[:3] == PROBE:
            return True
    return False


def patched(
    pod: dict[str, Any], volumes: list[SidecarVolume], injection: Injection
) -> dict[str, Any]:
    """A copy of ``pod`` with the sidecars in; ``Refused`` on a name the pod already uses."""
    out = copy.deepcopy(pod)
    spec = out.setdefault("spec", {})
    served = {v.name for v in volumes}
    pod_volumes = list(spec.get("volumes") or [])
    for volume in volumes:
        pod_volumes[volume.index] = {"name": volume.name, "emptyDir": {}}
    taken = {v.get("name") for v in pod_volumes if isinstance(v, dict)}
    for added in injection.volumes:
        if added["name"] in taken:
            raise Refused(f"the pod already has a volume named {added['name']}")
    spec["volumes"] = pod_volumes + injection.volumes
    init = [_propagated(c, served) for c in spec.get("initContainers") or []]
    names = {c.get("name") for c in [*init, *(spec.get("containers") or [])]}
    for sidecar in injection.sidecars:
        if sidecar["name"] in names:
            raise Refused(f"the pod already has a container named {sidecar['name']}")
    spec["initContainers"] = injection.sidecars + init
    spec["containers"] = [_propagated(c, served) for c in spec.get("containers") or []]
    grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE)
    if injection.grace_seconds is not None and (grace is None or grace < injection.grace_seconds):
        spec["terminationGracePeriodSeconds"] = injection.grace_seconds
    metadata = out.setdefault("metadata", {})
    annotations = dict(metadata.get("annotations") or {})
    annotations[INJECTED] = ", ".join(f"{v.name}={v.source}" for v in volumes)
    metadata["annotations"] = annotations
    return out


def json_patch(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``add`` operations that turn ``before`` into ``after`` (the fields above)."""
    ops = []
    for path in (
        ("spec", "volumes"),
        ("spec", "initContainers"),
        ("spec", "containers"),
        ("spec", "terminationGracePeriodSeconds"),
        ("metadata", "annotations"),
    ):
        old = (before.get(path[0]) or {}).get(path[1])
        new = (after.get(path[0]) or {}).get(path[1])
        if new != old:
            ops.append({"op": "add", "path": "/" + "/".join(path), "value": new})
    return ops


def _propagated(container: dict[str, Any], served: set[str]) -> dict[str, Any]:
    """``container`` with ``HostToContainer`` on its mounts of the served volumes."""
    out = dict(container)
    mounts = []
    for mount in container.get("volumeMounts") or []:
        if isinstance(mount, dict) and mount.get("name") in served:
            mount = {**mount, "mountPropagation": "HostToContainer"}
        mounts.append(mount)
    if "volumeMounts" in container:
        out["volumeMounts"] = mounts
    return out
