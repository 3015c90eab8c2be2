"""The data-readiness check's decisions on Workload objects in the shape Kueue writes."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cloudfs.k8s import admission
from cloudfs.k8s.admission import Action, CheckState, Readiness, decide, status_patch
from cloudfs.k8s.dataset_sizes import dataset_bytes, parse_sizes
from cloudfs.k8s.warmup_job import warmup_job, workload_claims

CHECK = "cloudfs-data-ready"
GIB = 1 << 30
NOW = datetime(2026, 12, 6, 3, 5, tzinfo=UTC)
NODES = ["node-a", "node-b", "node-c"]


def workload() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(
        (Path(__file__).parent / "workloads" / "quota_reserved.json").read_text()
    )
    return body


def view(cached: dict[str, int], size: int | None = 120 * GIB, **kw: Any) -> Readiness:
    return Readiness(
        dataset_bytes={"imagenet": size}, cached={"imagenet": cached}, eligible=NODES, **kw
    )


def test_not_ours_is_left_alone() -> None:
    d = decide(workload(), "someone-elses-check", view({"node-a": 120 * GIB}))
    assert d.action is Action.NONE
    assert status_patch(workload(), "someone-elses-check", d) is None


def test_no_quota_reserved_yet_waits() -> None:
    wl = workload()
    wl["status"]["conditions"][0]["status"] = "False"
    assert decide(wl, CHECK, view({"node-a": 120 * GIB})).action is Action.NONE


@pytest.mark.parametrize("state", ["Ready", "Retry", "Rejected"])
def test_a_decided_check_is_not_touched_again(state: str) -> None:
    wl = workload()
    wl["status"]["admissionChecks"][0]["state"] = state
    assert decide(wl, CHECK, view({})).action is Action.NONE


def test_partly_cached_warms_the_best_nodes_and_reports_progress() -> None:
    cached = {"node-a": 90 * GIB, "node-b": 60 * GIB, "node-c": 10 * GIB}
    d = decide(workload(), CHECK, view(cached))
    assert d.action is Action.WARM and d.state is CheckState.PENDING
    assert d.nodes == ["node-a", "node-b"]  # two pods; the nodes holding most
    assert d.message == "warming: 62% of 120 GiB cached on 2 nodes (ready at 80%)"
    body = status_patch(workload(), CHECK, d, NOW)
    assert body == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-resnet50-train-3f2a1", "namespace": "ml"},
        "status": {"admissionChecks": [{
            "name": CHECK, "state": "Pending", "message": d.message,
            "lastTransitionTime": "2026-12-06T03:00:00Z",  # the state did not change
        }]},
    }  # fmt: skip


def test_threshold_met_on_every_chosen_node_is_ready() -> None:
    cached = {"node-a": 100 * GIB, "node-b": 97 * GIB, "node-c": 0}
    d = decide(workload(), CHECK, view(cached))
    assert d.action is Action.DECIDE and d.state is CheckState.READY
    body = status_patch(workload(), CHECK, d, NOW)
    assert body is not None
    (entry,) = body["status"]["admissionChecks"]  # ours only: "provisioning" stays Kueue's
    assert entry["state"] == "Ready" and entry["lastTransitionTime"] == "2026-12-06T03:05:00Z"
    assert entry["message"] == "ready: 82% of 120 GiB cached on 2 nodes"


def test_the_annotation_sets_the_threshold() -> None:
    wl = workload()
    wl["metadata"]["annotations"][admission.READY_FRACTION_ANNOTATION] = "0.5"
    d = decide(wl, CHECK, view({"node-a": 61 * GIB, "node-b": 60 * GIB}))
    assert d.state is CheckState.READY
    assert admission.ready_fraction(wl) == 0.5
    wl["metadata"]["annotations"][admission.READY_FRACTION_ANNOTATION] = "lots"
    assert admission.ready_fraction(wl) == admission.DEFAULT_READY_FRACTION


def test_a_volume_the_tree_service_lacks_is_rejected() -> None:
    d = decide(workload(), CHECK, view({}, missing=frozenset({"imagenet"})))
    assert d.state is CheckState.REJECTED and d.message == "no such CloudFS volume: imagenet"
    body = status_patch(workload(), CHECK, d, NOW)
    assert body is not None and body["status"]["admissionChecks"][0]["state"] == "Rejected"


def test_unknown_size_or_no_node_is_retry() -> None:
    d = decide(workload(), CHECK, view({}, size=None))
    assert d.state is CheckState.RETRY and "size of volume imagenet unknown" in d.message
    no_nodes = Readiness({"imagenet": GIB}, {"imagenet": {}}, eligible=[])
    assert decide(workload(), CHECK, no_nodes).state is CheckState.RETRY


def test_an_unchanged_message_writes_nothing() -> None:
    wl = workload()
    d = decide(wl, CHECK, view({"node-a": 10 * GIB}))
    wl["status"]["admissionChecks"][0]["message"] = d.message
    assert status_patch(wl, CHECK, d, NOW) is None


def test_a_workload_being_deleted_is_left_alone() -> None:
    wl = workload()
    wl["metadata"]["deletionTimestamp"] = "2026-12-06T03:04:00Z"
    assert decide(wl, CHECK, view({})).action is Action.NONE


def test_admission_check_active_condition() -> None:
    check = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
             "metadata": {"name": CHECK, "generation": 1},
             "spec": {"controllerName": "cloudfs.io/data-readiness"}}  # fmt: skip
    assert admission.is_ours(check) and not admission.is_ours({"spec": {"controllerName": "x"}})
    body = admission.active_patch(check, NOW)
    assert body is not None
    (cond,) = body["status"]["conditions"]
    assert cond["type"] == "Active" and cond["status"] == "True"
    done = copy.deepcopy(check)
    done["status"] = body["status"]
    assert admission.active_patch(done) is None


def test_dataset_sizes() -> None:
    assert parse_sizes("imagenet=120Gi, coco=20GiB") == {"imagenet": 120 * GIB, "coco": 20 * GIB}
    assert dataset_bytes(workload(), ["imagenet", "coco"], {"coco": 5}) == {
        "imagenet": 120 * GIB, "coco": 5,
    }  # fmt: skip


def test_warmup_job_is_pinned_and_mounts_the_claims() -> None:
    wl = workload()
    assert workload_claims(wl) == ["imagenet"]
    job = warmup_job(wl, "node-a", ["imagenet"], "ghcr.io/cloudfs/cloudfs-csi:0.1.0")
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeName"] == "node-a" and job["metadata"]["namespace"] == "ml"
    assert pod["containers"][0]["args"] == ["warmup", "/data/imagenet"]
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "imagenet", "readOnly": True}
    assert warmup_job(wl, "node-a", [], "i")["metadata"]["name"] == job["metadata"]["name"]
    assert warmup_job(wl, "node-b", [], "i")["metadata"]["name"] != job["metadata"]["name"]
