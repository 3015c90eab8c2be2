"""The warm-up Job: ``cloudfs warmup`` on one node, through the workload's own claims.

One batch/v1 Job per (Workload, node), in the Workload's namespace, pinned to
the node with ``nodeName`` (the scheduler is bypassed: the node was chosen by
the admission check). Its pod mounts the CloudFS PVCs of the Workload's pod
templates read-only, so the CSI node plugin mounts them there exactly as for
the training pods, and ``cloudfs warmup`` fills that mount's cache; the mount
then reports its cached bytes to the tree service, which is how the check
sees progress. The name is derived from the Workload's uid and the node, so
creating it again is an idempotent 409.
"""

from __future__ import annotations

import hashlib
from typing import Any

MOUNT_ROOT = "/data"
TTL_SECONDS = 3600  # finished warm-up Jobs are garbage-collected after an hour


def workload_claims(workload: dict[str, Any]) -> list[str]:
    """The PVC names the Workload's pod templates mount, each once."""
    claims: list[str] = []
    for podset in (workload.get("spec") or {}).get("podSets") or []:
        spec = ((podset or {}).get("template") or {}).get("spec") or {}
        for volume in spec.get("volumes") or []:
            claim = ((volume or {}).get("persistentVolumeClaim") or {}).get("claimName")
            if isinstance(claim, str) and claim:
                claims.append(claim)
    return list(dict.fromkeys(claims))


def job_name(workload: dict[str, Any], node: str) -> str:
    uid = (workload.get("metadata") or {}).get("uid") or (workload.get("metadata") or {}).get(
        "name", ""
    )
    digest = hashlib.sha256(f"{uid}/{node}".encode()).hexdigest()[:12]
    return f"cloudfs-warmup-{digest}"


def warmup_job(
    workload: dict[str, Any], node: str, claims: list[str], image: str
) -> dict[str, Any]:
    """The Job warming ``claims`` (PVCs of the Workload's namespace) on ``node``."""
    metadata = workload.get("metadata") or {}
    mounts = [
        {"name": f"data-{i}", "mountPath": f"{MOUNT_ROOT}/{c}", "readOnly": True}
        for i, c in enumerate(claims)
    ]
    volumes = [
        {"name": f"data-{i}", "persistentVolumeClaim": {"claimName": c, "readOnly": True}}
        for i, c in enumerate(claims)
    ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(workload, node),
            "namespace": metadata.get("namespace", "default"),
            "labels": {
                "app.kubernetes.io/name": "cloudfs-warmup",
                "app.kubernetes.io/managed-by": "cloudfs-data-readiness",
            },
            "annotations": {
                "cloudfs.io/workload": metadata.get("name", ""),
                "cloudfs.io/node": node,
            },
        },
        "spec": {
            "backoffLimit": 3,
            "activeDeadlineSeconds": 6 * 3600,
            "ttlSecondsAfterFinished": TTL_SECONDS,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "cloudfs-warmup"}},
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "OnFailure",
                    "automountServiceAccountToken": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "warmup",
                            "image": image,
                            "command": ["cloudfs"],
                            "args": ["warmup", *(m["mountPath"] for m in mounts)],
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }
