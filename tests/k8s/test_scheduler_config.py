"""deploy/scheduler/: the KubeSchedulerConfiguration inside its ConfigMap (which
kubernetes-validate cannot check) names the extender's fields as
kubescheduler.config.k8s.io/v1 spells them, and points at the extender's Service and
at the verbs the extender serves."""

from __future__ import annotations

from typing import Any

import pytest

from cloudfs.k8s.server import FILTER_VERB, PRIORITIZE_VERB

yaml = pytest.importorskip("yaml", reason="needs PyYAML")

from tests.csi.manifests import one  # noqa: E402  (after the skip)

# The json tags of kubescheduler.config.k8s.io/v1 Extender (k8s.io/kube-scheduler/config/v1).
EXTENDER_FIELDS = {
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
    "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
    "ignorable",
}  # fmt: skip


def _config() -> dict[str, Any]:
    data = one("ConfigMap", "cloudfs-scheduler-config")["data"]["config.yaml"]
    config: dict[str, Any] = yaml.safe_load(data)
    return config


def test_the_scheduler_configuration() -> None:
    config = _config()
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in config["profiles"]] == ["cloudfs-scheduler"]
    assert config["leaderElection"]["resourceName"] == "cloudfs-scheduler"  # not the default's


def test_the_extender_entry() -> None:
    (extender,) = _config()["extenders"]
    assert set(extender) <= EXTENDER_FIELDS
    assert extender["filterVerb"] == FILTER_VERB
    assert extender["prioritizeVerb"] == PRIORITIZE_VERB
    assert extender["nodeCacheCapable"] is True
    assert extender["ignorable"] is True  # the extender away never blocks scheduling
    assert isinstance(extender["weight"], int) and extender["weight"] > 0
    service = one("Service", "cloudfs-scheduler-extender")
    port = service["spec"]["ports"][0]["port"]
    assert extender["urlPrefix"] == f"http://cloudfs-scheduler-extender.cloudfs.svc:{port}"
    container = one("Deployment", "cloudfs-scheduler-extender")["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert f"--listen=0.0.0.0:{port}" in container["args"]
    assert not any(a.startswith("--prefix") for a in container["args"])  # urlPrefix has no path


def test_the_scheduler_reads_the_configuration_it_is_given() -> None:
    pod = one("Deployment", "cloudfs-scheduler")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (flag,) = [a for a in container["command"] if a.startswith("--config=")]
    (mount,) = container["volumeMounts"]
    assert flag == f"--config={mount['mountPath']}/config.yaml"
    (volume,) = pod["volumes"]
    assert volume["configMap"]["name"] == "cloudfs-scheduler-config"


def test_mounts_report_under_the_kubernetes_node_name() -> None:
    pod = one("DaemonSet", "cloudfs-csi-node")["spec"]["template"]["spec"]
    mounter = next(c for c in pod["containers"] if c["name"] == "cloudfs-mounter")
    env = {e["name"]: e for e in mounter["env"]}
    assert env["CLOUDFS_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
