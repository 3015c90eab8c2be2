"""deploy/'s Kubernetes objects, loaded once for the manifest tests (needs PyYAML)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
MANIFESTS = sorted(
    [
        *DEPLOY.glob("csi/*.yaml"),
        *DEPLOY.glob("examples/*.yaml"),
        *DEPLOY.glob("scheduler/*.yaml"),
        *DEPLOY.glob("kueue/*.yaml"),
        *DEPLOY.glob("sidecar/*.yaml"),
    ]
)
# Kueue's kinds: validated against its CRD schemas by tests/k8s/test_kueue_manifests.py.
CRD_GROUPS = ("kueue.x-k8s.io/",)


def _docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append(
                    (f"{path.relative_to(DEPLOY)}:{doc['kind']}/{doc['metadata']['name']}", doc)
                )
    return out


DOCS = _docs()


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of ``kind`` (named ``name``) in deploy/."""
    found = [d for _, d in DOCS if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) against ``labels``."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        key, op, values = e["key"], e["operator"], e.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def job_pod(name: str) -> dict[str, Any]:
    """The pod the Job ``name``'s controller creates (as admission sees it: no name yet);
    a copy, for the caller to change."""
    job = copy.deepcopy(one("Job", name))
    template = job["spec"]["template"]
    metadata = {**template["metadata"], "namespace": job["metadata"]["namespace"],
                "generateName": f"{name}-"}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
