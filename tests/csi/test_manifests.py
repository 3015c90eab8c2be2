"""deploy/: every manifest is valid against the Kubernetes API schemas (no cluster needed),
and says what the CSI driver needs (no attach, pod info, Bidirectional propagation, ...)."""

from __future__ import annotations

from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="needs PyYAML (csi-driver[test])")
kv = pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate")

K8S_VERSION = "1.33.0"  # the schemas kubernetes-validate bundles for this release

from tests.csi.manifests import CRD_GROUPS, DEPLOY, DOCS, one  # noqa: E402  (after the skips)

BUILT_IN = [(i, d) for i, d in DOCS if not d["apiVersion"].startswith(CRD_GROUPS)]


@pytest.mark.parametrize("doc", [d for _, d in BUILT_IN], ids=[i for i, _ in BUILT_IN])
def test_valid_against_the_kubernetes_schema(doc: dict[str, Any]) -> None:
    kv.validate(doc, K8S_VERSION, strict=True)


def test_the_driver_objects_are_all_there() -> None:
    kinds = {d["kind"] for _, d in DOCS}
    assert {"CSIDriver", "DaemonSet", "Deployment", "StatefulSet", "StorageClass",
            "ClusterRole", "ClusterRoleBinding", "ServiceAccount", "PersistentVolumeClaim",
            "Pod", "Namespace"} <= kinds  # fmt: skip
    assert (DEPLOY / "Dockerfile").read_text().count("FROM ") == 2


def test_csidriver() -> None:
    spec = one("CSIDriver", "csi.cloudfs.io")["spec"]
    assert spec["attachRequired"] is False and spec["podInfoOnMount"] is True


def test_node_daemonset() -> None:
    pod = one("DaemonSet", "cloudfs-csi-node")["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    assert {"cloudfs-csi", "cloudfs-mounter", "node-driver-registrar", "liveness-probe"} <= set(
        containers
    )
    for name in ("cloudfs-csi", "cloudfs-mounter"):
        c = containers[name]
        assert c["securityContext"]["privileged"] is True
        kubelet = [m for m in c["volumeMounts"] if m["mountPath"] == "/var/lib/kubelet"]
        assert kubelet and kubelet[0]["mountPropagation"] == "Bidirectional"
    socket = "/run/cloudfs-csi/mounter.sock"
    assert f"--mounter-socket={socket}" in containers["cloudfs-csi"]["args"]
    assert f"--mounter-socket={socket}" in containers["cloudfs-mounter"]["args"]
    registrar = containers["node-driver-registrar"]["args"]
    assert (
        "--kubelet-registration-path=/var/lib/kubelet/plugins/csi.cloudfs.io/csi.sock" in registrar
    )
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["socket-dir"]["hostPath"]["path"] == "/var/lib/kubelet/plugins/csi.cloudfs.io"
    assert volumes["state-dir"]["hostPath"]["path"] == "/var/lib/cloudfs-csi"


def test_controller_and_storage_class() -> None:
    pod = one("Deployment", "cloudfs-csi-controller")["spec"]["template"]["spec"]
    images = [c["image"] for c in pod["containers"]]
    assert any("csi-provisioner" in i for i in images)
    sc = one("StorageClass", "cloudfs")
    assert sc["provisioner"] == "csi.cloudfs.io"
    from cloudfs_csi import params

    params.parse(sc["parameters"])  # the parameters are ones the controller accepts
    from cloudfs_csi.validation import mount_options

    mount_options(sc["mountOptions"])


def test_training_pod_sees_repaired_mounts() -> None:
    pod = one("Pod", "resnet50-train")["spec"]
    mounts = pod["containers"][0]["volumeMounts"]
    assert mounts[0]["mountPropagation"] == "HostToContainer"
    assert one("PersistentVolumeClaim", "imagenet")["spec"]["storageClassName"] == "cloudfs"
