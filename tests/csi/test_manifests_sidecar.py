"""deploy/sidecar/ says what the sidecar webhook's code expects: the API server sends it
only the pods that ask (never kube-system's or its own), at the path and port it serves,
with a failure policy that keeps an opted-in pod from starting without its mount; its
Deployment starts it with flags its parser takes, probes the path it serves, and holds
no more than it needs; and the example Job's pod is one the webhook injects.
(Schemas: test_manifests.py; the house rules every workload keeps: test_manifest_security.py.)
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

pytest.importorskip("yaml", reason="needs PyYAML (csi-driver[test])")

from cloudfs.cli.main import build_parser
from cloudfs.k8s import csi_names
from cloudfs.lib.endpoints import parse_host_port
from cloudfs.sidecar import containers, review, server, settings
from tests.csi.manifest_api import deploy_webhook
from tests.csi.manifests import DOCS, job_pod, one, selector_matches

NAMESPACE = "cloudfs"
NAME = "cloudfs-sidecar-webhook"
EXAMPLE = "resnet50-train-sidecar"
Obj = dict[str, Any]


def _webhook() -> Obj:
    (hook,) = one("MutatingWebhookConfiguration", "cloudfs-sidecar")["webhooks"]
    assert hook["name"] == "sidecar.cloudfs.io"
    return hook  # type: ignore[no-any-return]


def _pod() -> Obj:
    return one("Deployment", NAME)["spec"]["template"]  # type: ignore[no-any-return]


def _container() -> Obj:
    (container,) = _pod()["spec"]["containers"]
    return container  # type: ignore[no-any-return]


def _port(container: Obj, port: int | str) -> int:
    """A container port by number or name."""
    numbers = {p["name"]: p["containerPort"] for p in container["ports"]}
    return port if isinstance(port, int) else numbers[port]


def _namespace(name: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name}  # the label every namespace has


def test_only_pods_that_ask_outside_kube_system_and_cloudfs_are_sent() -> None:
    hook = _webhook()
    assert hook["objectSelector"] == {"matchLabels": {settings.INJECT: "true"}}
    namespaces = hook["namespaceSelector"]
    for excluded in ("kube-system", NAMESPACE, one("Deployment", NAME)["metadata"]["namespace"]):
        assert not selector_matches(namespaces, _namespace(excluded)), excluded
    assert selector_matches(namespaces, _namespace("default"))
    assert selector_matches(namespaces, _namespace("training"))
    # The webhook's own pods carry no opt-in label either.
    assert not selector_matches(hook["objectSelector"], _pod()["metadata"]["labels"])
    assert hook["rules"] == [{
        "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
        "resources": ["pods"], "scope": "Namespaced",
    }]  # fmt: skip


def test_failure_policy_and_timeouts() -> None:
    hook = _webhook()
    assert hook["failurePolicy"] == "Fail"  # an opted-in pod never runs without its mount
    assert hook["sideEffects"] == "NoneOnDryRun"  # the event is skipped on dry runs
    assert hook["timeoutSeconds"] == 10
    assert hook["admissionReviewVersions"] == ["v1"]
    assert review.API_VERSION == "admission.k8s.io/v1"
    assert hook["reinvocationPolicy"] == "Never"
    assert hook["matchPolicy"] == "Equivalent"


def test_the_api_server_reaches_the_mutate_path() -> None:
    ref = _webhook()["clientConfig"]["service"]
    assert "url" not in _webhook()["clientConfig"]
    assert ref["path"] == server.MUTATE_PATH
    service = one("Service", ref["name"])
    assert service["metadata"]["namespace"] == ref["namespace"] == NAMESPACE
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == ref["port"]]
    assert ref["port"] == 443
    assert selector_matches({"matchLabels": service["spec"]["selector"]},
                            _pod()["metadata"]["labels"])  # fmt: skip
    args = _args()
    assert _port(_container(), port["targetPort"]) == parse_host_port(args.listen, "--listen")[1]


def _args() -> Any:
    container = _container()
    command = container["command"] + container.get("args", [])
    assert command[:3] == ["cloudfs", "sidecar", "webhook"]
    try:
        return build_parser().parse_args(command[1:])
    except SystemExit:
        pytest.fail(f"`cloudfs` refuses {command[1:]}")


def test_the_deployment_runs_the_webhook_with_its_certificate() -> None:
    deployment = one("Deployment", NAME)
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] >= 2
    args = _args()
    assert args.run.__name__ == "run_webhook"
    assert args.image == _container()["image"]  # the sidecars: the same release
    assert args.driver_name == one("CSIDriver", csi_names.DRIVER_NAME)["metadata"]["name"]
    assert args.on_error == "refuse" and args.native_sidecars == "auto"
    mounts = {m["mountPath"]: m for m in _container()["volumeMounts"]}
    volumes = {v["name"]: v for v in _pod()["spec"]["volumes"]}
    for path in (args.tls_cert, args.tls_key):
        directory, _, key = path.rpartition("/")
        mount = mounts[directory]
        assert mount.get("readOnly") is True, path
        secret = volumes[mount["name"]]["secret"]
        assert secret["secretName"] == "cloudfs-sidecar-webhook-tls"
        assert key in ("tls.crt", "tls.key")  # the keys of a kubernetes.io/tls Secret
    budget = one("PodDisruptionBudget", NAME)["spec"]
    assert budget["minAvailable"] == 1
    assert selector_matches(budget["selector"], _pod()["metadata"]["labels"])


@pytest.mark.parametrize("kind", ["readinessProbe", "livenessProbe"])
def test_probes_ask_the_health_path_over_https(kind: str) -> None:
    probe = _container()[kind]["httpGet"]
    assert probe["scheme"] == "HTTPS"  # the server serves TLS only
    assert probe["path"] == server.HEALTH_PATH
    assert _port(_container(), probe["port"]) == parse_host_port(_args().listen, "--listen")[1]


def _rules(kind: str, name: str) -> set[tuple[str, str, str]]:
    """(apiGroup or "url", resource or URL, verb) of the roles bound to the webhook."""
    out = set()
    for _, binding in DOCS:
        if binding["kind"] != kind or binding["roleRef"]["name"] != name:
            continue
        assert {"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE} in binding[
            "subjects"
        ]
        role = one(binding["roleRef"]["kind"], name)
        for rule in role["rules"]:
            for verb in rule["verbs"]:
                for url in rule.get("nonResourceURLs", []):
                    out.add(("url", url, verb))
                for group in rule.get("apiGroups", []):
                    out |= {(group, resource, verb) for resource in rule["resources"]}
    return out


def test_rbac_grants_exactly_what_a_review_reads() -> None:
    assert _pod()["spec"]["serviceAccountName"] == NAME
    one("ServiceAccount", NAME)
    bound = {
        (b["roleRef"]["name"]) for _, b in DOCS
        if b["kind"] == "ClusterRoleBinding"
        and any(s["kind"] == "ServiceAccount" and s["name"] == NAME for s in b["subjects"])
    }  # fmt: skip
    granted = set().union(*(_rules("ClusterRoleBinding", name) for name in bound))
    assert granted == {
        ("", "persistentvolumeclaims", "get"),  # volumes.resolve: the pod's claims
        ("", "persistentvolumes", "get"),  # ... their PVs
        ("storage.k8s.io", "storageclasses", "get"),  # an unbound claim's class
        ("", "secrets", "get"),  # the volume's Secret: its key names
        ("url", "/version", "get"),  # --native-sidecars=auto
        ("", "events", "create"),  # --on-error=admit: the Warning event
    }
    # Secrets in a role of their own, so that it can be bound per namespace instead.
    assert _rules("ClusterRoleBinding", "cloudfs-sidecar-webhook-secrets") == {
        ("", "secrets", "get")
    }
    roles = [d for _, d in DOCS if d["kind"] in ("Role", "RoleBinding")]
    assert not [r for r in roles if "sidecar" in r["metadata"]["name"]]


def test_the_webhook_holds_least_privilege() -> None:
    pod = _pod()["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }  # fmt: skip
    assert _container()["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }  # fmt: skip
    assert "hostNetwork" not in pod and "hostPath" not in json.dumps(pod["volumes"])


# ---- the example ----


def test_the_example_asks_and_its_objects_line_up() -> None:
    pod = job_pod(EXAMPLE)
    assert pod["metadata"]["labels"][settings.INJECT] == "true"
    assert selector_matches(_webhook()["objectSelector"], pod["metadata"]["labels"])
    assert selector_matches(_webhook()["namespaceSelector"],
                            _namespace(pod["metadata"]["namespace"]))  # fmt: skip
    config = settings.WebhookConfig(image=_args().image)
    assert settings.pod_settings(pod, config).cache_size == 50 << 30
    (volume,) = pod["spec"]["volumes"]
    pvc = one("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    pv = one("PersistentVolume", pvc["spec"]["volumeName"])
    assert pv["spec"]["claimRef"] == {"namespace": pvc["metadata"]["namespace"],
                                      "name": pvc["metadata"]["name"]}  # fmt: skip
    ref = pv["spec"]["csi"]["nodeStageSecretRef"]
    assert ref["namespace"] == pod["metadata"]["namespace"]  # a pod mounts its own namespace's
    secret = one("Secret", ref["name"])
    assert secret["metadata"]["namespace"] == ref["namespace"]


def test_the_webhook_injects_the_example() -> None:
    """The example Job's pod through the real webhook, its reads answered from the example's
    own objects: one sidecar whose command `cloudfs` parses, read-only, 50Gi of cache."""
    webhook, api = deploy_webhook(
        settings.WebhookConfig(image=_args().image, driver=_args().driver_name)
    )
    pod = job_pod(EXAMPLE)
    answer = webhook.review({
        "apiVersion": review.API_VERSION, "kind": "AdmissionReview",
        "request": {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "operation": "CREATE", "namespace": pod["metadata"]["namespace"],
                    "object": pod},
    })  # fmt: skip
    response = answer["response"]
    assert response["allowed"] is True and "status" not in response, response
    ops = {op["path"]: op["value"] for op in json.loads(base64.b64decode(response["patch"]))}
    (sidecar,) = ops["/spec/initContainers"]
    assert sidecar["restartPolicy"] == "Always" and sidecar["image"] == _container()["image"]
    args = build_parser().parse_args(sidecar["command"][1:])
    assert args.ufs_uri == "s3://datasets/imagenet" and args.read_only
    assert args.cache_size == str(50 << 30)
    assert {e["name"] for e in sidecar["env"]} == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    cache = next(v for v in ops["/spec/volumes"] if v["name"] == containers.CACHE_VOLUME)
    assert cache["emptyDir"]["sizeLimit"] == f"{(50 << 10) + 512}Mi"
    (trainer,) = ops["/spec/containers"]
    assert trainer["volumeMounts"][0]["mountPropagation"] == "HostToContainer"
    assert "/spec/terminationGracePeriodSeconds" not in ops  # read-only: nothing to drain
    assert api.created == []
    kv = pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate")
    for path, value in ops.items():  # each op an `add` of a member of an object
        _, top, member = path.split("/")
        pod[top][member] = value
    kv.validate(pod, "1.33.0", strict=True)  # the pod as the API server will store it
