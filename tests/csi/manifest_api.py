"""The reads the sidecar webhook makes, answered from deploy/'s objects as an API server
would hold them once applied (a Secret's ``stringData`` stored as base64 ``data``).
``/version`` answers 1.33, the release the manifests are validated against.

What ``cloudfs.sidecar.review.Api`` asks of ``KubeApi``: ``get`` (404 as
``KubeApiError(not_found=True)``) and ``create`` (kept in ``created``).
"""

from __future__ import annotations

import base64
import copy
from typing import Any

from cloudfs.sidecar.review import NativeSidecars, Webhook
from cloudfs.sidecar.settings import WebhookConfig
from testkit.kube_api import MemoryKubeApi
from tests.csi.manifests import DOCS

KINDS = ("PersistentVolume", "PersistentVolumeClaim", "Secret", "StorageClass")
VERSION = {"major": "1", "minor": "33", "gitVersion": "v1.33.0"}


def _stored(doc: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    if doc["kind"] == "Secret" and "stringData" in out:
        data = out.setdefault("data", {})
        for key, value in out.pop("stringData").items():
            data[key] = base64.b64encode(value.encode()).decode()
    return out


def _path(doc: dict[str, Any]) -> str:
    kind, meta = doc["kind"], doc["metadata"]
    if kind == "StorageClass":
        return f"/apis/storage.k8s.io/v1/storageclasses/{meta['name']}"
    plural = {"PersistentVolume": "persistentvolumes", "PersistentVolumeClaim":
              "persistentvolumeclaims", "Secret": "secrets"}[kind]  # fmt: skip
    if "namespace" in meta:
        return f"/api/v1/namespaces/{meta['namespace']}/{plural}/{meta['name']}"
    return f"/api/v1/{plural}/{meta['name']}"


def manifest_api(docs: list[dict[str, Any]]) -> MemoryKubeApi:
    """An API server holding ``docs`` (PVs, PVCs, Secrets, StorageClasses)."""
    return MemoryKubeApi({"/version": VERSION} | {_path(d): _stored(d) for d in docs})


def deploy_webhook(config: WebhookConfig) -> tuple[Webhook, MemoryKubeApi]:
    """The real webhook over an API server holding deploy/'s volumes and Secrets."""
    api = manifest_api([d for _, d in DOCS if d["kind"] in KINDS])
    return Webhook(config, api, NativeSidecars("auto", api)), api
