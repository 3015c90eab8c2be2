"""Which CloudFS volumes a pod reads: what the extender scores nodes by.

Three sources, all counted (each volume once, in the order found):

* the annotation ``cloudfs.io/volumes: vol1,vol2`` (volume names of the tree
  service the extender asks), a direct mapping that needs no API access;
* the annotation ``cloudfs.io/datasets: vol1/train,vol2/val``: the volume is
  the first path segment. Nodes are scored by the whole volume's cached
  bytes for now (mounts report per volume, not per directory);
* the pod's volumes of the CloudFS CSI driver: inline ephemeral ones
  (``csi.volumeAttributes.uri``) directly, and PVCs through a
  ``ClaimResolver`` (PVC -> PV -> ``csi.volumeHandle`` or its ``uri``
  attribute), which needs the Kubernetes API.

A volume is counted by name when its URI is ``grpc://HOST:PORT/NAME``; other
URIs (a bucket mounted straight, no tree service) are not reported by mounts
and are skipped. A claim that cannot be resolved is logged and skipped: the
pod is then scored by what is left, never refused.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from cloudfs.errors import UsageError
from cloudfs.k8s.csi_names import CONTEXT_URI as URI_ATTRIBUTE
from cloudfs.k8s.csi_names import DRIVER_NAME
from cloudfs.meta.client.tree_uri import is_tree_uri, parse_tree_uri

log = logging.getLogger(__name__)

VOLUMES_ANNOTATION = "cloudfs.io/volumes"
DATASETS_ANNOTATION = "cloudfs.io/datasets"


class ClaimResolver(Protocol):
    def claim_volume(self, namespace: str, claim: str) -> str | None:
        """The CloudFS volume of PVC ``claim`` in ``namespace``; None if it is
        not bound or not CloudFS's. Raises on API errors (the caller logs)."""
        ...


def _volume_of_uri(uri: object) -> str | None:
    if not isinstance(uri, str) or not is_tree_uri(uri):
        return None
    try:
        return parse_tree_uri(uri).volume
    except UsageError:
        return None


def csi_volume_name(csi: Any, driver: str, *, handle: bool) -> str | None:
    """The volume of a CSI source of ``driver`` (a PV's ``spec.csi`` with ``handle``,
    else a pod's inline ``csi``); None if it is another driver's or no tree volume."""
    if not isinstance(csi, dict) or csi.get("driver") != driver:
        return None
    attributes = csi.get("volumeAttributes") or {}
    uri = attributes.get(URI_ATTRIBUTE) if isinstance(attributes, dict) else None
    return _volume_of_uri(uri) or (_volume_of_uri(csi.get("volumeHandle")) if handle else None)


def _split(value: object) -> list[str]:
    if not isinstance(value, str):
        return []
    return [item.strip() for item in value.split(",") if item.strip()]


def pod_volumes(
    pod: dict[str, Any], resolver: ClaimResolver | None, driver: str = DRIVER_NAME
) -> list[str]:
    """The CloudFS volume names ``pod`` reads (see the module docstring)."""
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    found = _split(annotations.get(VOLUMES_ANNOTATION))
    found += [d.strip("/").split("/")[0] for d in _split(annotations.get(DATASETS_ANNOTATION))]
    namespace = metadata.get("namespace") or "default"
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        if name := csi_volume_name(volume.get("csi"), driver, handle=False):
            found.append(name)
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if isinstance(claim, str) and claim and resolver is not None:
            try:
                if name := resolver.claim_volume(namespace, claim):
                    found.append(name)
            except Exception as exc:  # the API away: score by what is known
                log.warning("PVC %s/%s: cannot resolve its volume (%s)", namespace, claim, exc)
    return list(dict.fromkeys(v for v in found if v))
