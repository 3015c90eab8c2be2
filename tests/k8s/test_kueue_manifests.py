"""deploy/'s Kueue objects and our Workload fixtures fit Kueue's CRD schemas, and the
queues wire the data-readiness check to the controller's name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("yaml", reason="needs PyYAML")

from cloudfs.k8s import admission  # noqa: E402
from tests.csi.manifests import CRD_GROUPS, DOCS, one  # noqa: E402
from tests.k8s.kueue_schemas import validate  # noqa: E402

KUEUE_DOCS = [(i, d) for i, d in DOCS if d["apiVersion"].startswith(CRD_GROUPS)]
FIXTURES = sorted((Path(__file__).parent / "workloads").glob("*.json"))


@pytest.mark.parametrize("doc", [d for _, d in KUEUE_DOCS], ids=[i for i, _ in KUEUE_DOCS])
def test_valid_against_kueues_crd(doc: dict[str, Any]) -> None:
    validate(doc)


def test_kueue_objects_are_all_there() -> None:
    kinds = {d["kind"] for _, d in KUEUE_DOCS}
    assert {"ResourceFlavor", "AdmissionCheck", "ClusterQueue", "LocalQueue"} <= kinds


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_workload_fixtures_are_in_kueues_shape(path: Path) -> None:
    validate(json.loads(path.read_text()))


def test_the_schema_check_catches_mistakes() -> None:
    check = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
             "metadata": {"name": "x"}, "spec": {"controllerName": ""}}  # fmt: skip
    with pytest.raises(jsonschema.ValidationError):
        validate(check)  # minLength 1
    # A ConfigMap cannot be a check's parameters: apiGroup "" is refused (minLength 1).
    check["spec"] = {"controllerName": "c", "parameters": {"apiGroup": "", "kind": "ConfigMap",
                                                          "name": "p"}}  # fmt: skip
    with pytest.raises(jsonschema.ValidationError):
        validate(check)


def test_the_queue_requires_our_check_and_our_controller_runs_it() -> None:
    check = one("AdmissionCheck")
    assert check["spec"]["controllerName"] == admission.CONTROLLER_NAME
    cq = one("ClusterQueue", "training")
    names = [c["name"] for c in cq["spec"]["admissionChecksStrategy"]["admissionChecks"]]
    assert names == [check["metadata"]["name"]]
    assert one("LocalQueue", "training")["spec"]["clusterQueue"] == "training"
    flavors = {f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]}
    assert flavors == {one("ResourceFlavor")["metadata"]["name"]}
    job = one("Job", "resnet50-train")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    assert job["spec"]["template"]["spec"]["schedulerName"] == "cloudfs-scheduler"
    args = one("Deployment", "cloudfs-data-readiness")["spec"]["template"]["spec"]
    assert args["containers"][0]["args"][:2] == ["scheduler", "admission-check"]
