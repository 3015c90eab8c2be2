"""A small cluster as the webhook sees it through the API server, and AdmissionReviews in the
API server's shape (tests/sidecar/recorded/ holds them as the API server sends them).

Namespace ``team-a``: PVC ``imagenet`` (ReadOnlyMany) bound to the static PV
``imagenet-pv`` (``s3://datasets/imagenet``, ``-o dataset_mode=on``), PVC
``ckpt`` (ReadWriteMany) bound to the provisioned PV ``pvc-77`` (a tree-service
volume, write-back, cache group ``training``), PVC ``pending`` of the CloudFS
StorageClass not bound yet, PVC ``scratch`` of another driver; Secret
``cloudfs-volume`` (token, CA, S3 keys) and ``other-creds``; Kubernetes 1.33.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).parent / "recorded"
NS = "team-a"


def objects(minor: str = "33") -> dict[str, Any]:
    pvc = f"/api/v1/namespaces/{NS}/persistentvolumeclaims"
    secrets = f"/api/v1/namespaces/{NS}/secrets"
    return {
        "/version": {"major": "1", "minor": minor, "gitVersion": f"v1.{minor}.2"},
        f"{pvc}/imagenet": _pvc("imagenet", "imagenet-pv", ["ReadOnlyMany"], ""),
        f"{pvc}/ckpt": _pvc("ckpt", "pvc-77", ["ReadWriteMany"], "cloudfs"),
        f"{pvc}/pending": _pvc("pending", None, ["ReadWriteOnce"], "cloudfs"),
        f"{pvc}/scratch": _pvc("scratch", "ebs-1", ["ReadWriteOnce"], "gp3"),
        "/api/v1/persistentvolumes/imagenet-pv": _pv(
            "imagenet-pv", "s3://datasets/imagenet", {}, ["dataset_mode=on"]
        ),
        "/api/v1/persistentvolumes/pvc-77": _pv(
            "pvc-77", "grpc://cloudfs-meta.cloudfs.svc:7070/pvc-77",
            {"uri": "grpc://cloudfs-meta.cloudfs.svc:7070/pvc-77", "cacheGroup": "training"},
            ["write_mode=back", "memory_cache_size=1G"],
        ),
        "/api/v1/persistentvolumes/ebs-1": {
            "kind": "PersistentVolume", "apiVersion": "v1", "metadata": {"name": "ebs-1"},
            "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"}},
        },
        "/apis/storage.k8s.io/v1/storageclasses/cloudfs": {
            "kind": "StorageClass", "apiVersion": "storage.k8s.io/v1",
            "metadata": {"name": "cloudfs"}, "provisioner": "csi.cloudfs.io",
        },
        "/apis/storage.k8s.io/v1/storageclasses/gp3": {
            "kind": "StorageClass", "apiVersion": "storage.k8s.io/v1",
            "metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com",
        },
        f"{secrets}/cloudfs-volume": _secret(
            "cloudfs-volume", ["token", "ca.crt", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
        ),
        f"{secrets}/other-creds": _secret("other-creds", ["AWS_ACCESS_KEY_ID", "cacheToken"]),
    }


def _pvc(name: str, volume: str | None, modes: list[str], storage_class: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": modes, "storageClassName": storage_class,
                            "volumeMode": "Filesystem",
                            "resources": {"requests": {"storage": "1Gi"}}}  # fmt: skip
    if volume:
        spec["volumeName"] = volume
    return {
        "kind": "PersistentVolumeClaim", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": NS}, "spec": spec,
        "status": {"phase": "Bound" if volume else "Pending"},
    }  # fmt: skip


def _pv(name: str, handle: str, attributes: dict[str, str], options: list[str]) -> dict[str, Any]:
    return {
        "kind": "PersistentVolume", "apiVersion": "v1", "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteMany"],
            "mountOptions": options,
            "csi": {"driver": "csi.cloudfs.io", "volumeHandle": handle,
                    "volumeAttributes": attributes,
                    "nodeStageSecretRef": {"name": "cloudfs-volume", "namespace": NS}},
        },
    }  # fmt: skip


def _secret(name: str, keys: list[str]) -> dict[str, Any]:
    return {
        "kind": "Secret", "apiVersion": "v1", "metadata": {"name": name, "namespace": NS},
        "type": "Opaque", "data": {k: base64.b64encode(b"secret-" + k.encode()).decode()
                                   for k in keys},
    }  # fmt: skip


def recorded(name: str) -> dict[str, Any]:
    review: dict[str, Any] = json.loads((RECORDED / name).read_text())
    return review


def training_review() -> dict[str, Any]:
    """The recorded review of a Job's pod: PVCs imagenet (read) and ckpt (write-back)."""
    return recorded("job_pod_create.json")


def with_pod(review: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of ``review`` whose pod has ``changes`` applied: ``annotations``, ``labels``
    (merged into metadata), ``volumes`` (spec.volumes replaced), ``dry_run``."""
    out = copy.deepcopy(review)
    pod = out["request"]["object"]
    for key in ("annotations", "labels"):
        if key in changes:
            pod["metadata"].setdefault(key, {}).update(changes[key])
    if "volumes" in changes:
        pod["spec"]["volumes"] = changes["volumes"]
    if "dry_run" in changes:
        out["request"]["dryRun"] = changes["dry_run"]
    return out


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    response = answer["response"]
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return ops
