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

from cloudfs.k8s.kube_api import KubeApiError
from cloudfs.sidecar.review import NativeSidecars, Webhook
from cloudfs.sidecar.settings import WebhookConfig
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


class ManifestApi:
    """An API server holding ``docs`` (PVs, PVCs, Secrets, StorageClasses)."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self._objects = {"/version": VERSION} | {_path(d): _stored(d) for d in docs}
        self.created: list[tuple[str, dict[str, Any]]] = []

    def get(self, path: str) -> dict[str, Any]:
        try:
            return copy.deepcopy(self._objects[path])
        except KeyError:
            raise KubeApiError(f"GET {path}: HTTP 404", not_found=True) from None

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append((path, body))
        return body


def deploy_webhook(config: WebhookConfig) -> tuple[Webhook, ManifestApi]:
    """The real webhook over an API server holding deploy/'s volumes and Secrets."""
    api = ManifestApi([d for _, d in DOCS if d["kind"] in KINDS])
    return Webhook(config, api, NativeSidecars("auto", api)), api
