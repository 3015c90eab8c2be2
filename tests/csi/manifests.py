"""deploy/'s Kubernetes objects, loaded once for the manifest tests (needs PyYAML)."""

from __future__ import annotations

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
