"""deploy/ runs with least privilege: what each container may do, and who may reach whom.

Only the node plugin's two containers that mount (the driver and the mounter) are
privileged; every other container drops every capability, cannot escalate, and has a
read-only root filesystem with its writable paths on volumes. Outside the node plugin
every container runs as a user other than root (the example's init container that
hands a hostPath to that user holds CHOWN and nothing else). The NetworkPolicies deny
ingress by default and let the mounts (node plugin pods) reach the tree service and the
cache workers, selected by the labels the workloads actually carry; the sidecar webhook's
port is open to its one client, the API server, which no selector can name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("yaml", reason="needs PyYAML (csi-driver[test])")

from tests.csi.manifests import DOCS, one, selector_matches

NAMESPACE = "cloudfs"
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
NODE = "cloudfs-csi-node"
MOUNTERS = {"cloudfs-csi", "cloudfs-mounter"}  # the node plugin's containers that mount
CHOWN_INIT = ("cloudfs-cache-node", "cache-dir-owner")  # example DaemonSet's init container
# Where each cloudfs process writes, as its flags say (besides /tmp).
WRITABLE_FLAGS = ("--cache-dir=", "--engine=lmdb://", "--log-file=")

Container = dict[str, Any]
ANYONE = "*"  # an ingress rule without `from`
SIDECARS = "pods:[('cloudfs.io/inject', 'true')]"  # any namespace's pods that asked for sidecars


def workloads() -> list[dict[str, Any]]:
    return [
        d
        for _, d in DOCS
        if d["kind"] in WORKLOAD_KINDS and d["metadata"].get("namespace") == NAMESPACE
    ]


def _containers(pod: dict[str, Any]) -> Iterator[tuple[str, Container]]:
    for c in pod.get("initContainers", []):
        yield "init", c
    for c in pod["containers"]:
        yield "main", c


def _effective(pod: dict[str, Any], container: Container, key: str) -> Any:
    """A security setting as the kubelet applies it: the container's, else the pod's."""
    own = container.get("securityContext", {})
    return own[key] if key in own else pod.get("securityContext", {}).get(key)


def _ids(objs: list[dict[str, Any]]) -> list[str]:
    return [f"{o['kind']}/{o['metadata']['name']}" for o in objs]


def test_every_cloudfs_workload_is_checked() -> None:
    names = {w["metadata"]["name"] for w in workloads()}
    assert {NODE, "cloudfs-csi-controller", "cloudfs-meta", "cloudfs-cache",
            "cloudfs-cache-node"} <= names  # fmt: skip


@pytest.mark.parametrize("workload", workloads(), ids=_ids(workloads()))
def test_containers_hold_no_more_than_they_need(workload: dict[str, Any]) -> None:
    name = workload["metadata"]["name"]
    pod = workload["spec"]["template"]["spec"]
    for part, c in _containers(pod):
        where = f"{name}/{c['name']}"
        sc = c.get("securityContext", {})
        if name == NODE and c["name"] in MOUNTERS:
            assert sc.get("privileged") is True, where
            continue
        assert not sc.get("privileged"), f"{where} is privileged"
        assert sc.get("allowPrivilegeEscalation") is False, where
        assert sc.get("readOnlyRootFilesystem") is True, where
        caps = sc.get("capabilities", {})
        assert caps.get("drop") == ["ALL"], where
        assert _effective(pod, c, "seccompProfile") == {"type": "RuntimeDefault"}, where
        if (name, c["name"]) == CHOWN_INIT:
            assert part == "init" and caps.get("add") == ["CHOWN"], where
        else:
            assert not caps.get("add"), f"{where} adds capabilities"
        for mount in c.get("volumeMounts", []):
            assert "mountPropagation" not in mount or mount["mountPropagation"] == (
                "HostToContainer"
            ), f"{where}: only a privileged container may propagate mounts back"


# Not the node plugin: it mounts, and its sidecars use kubelet's root-owned sockets.
NOT_NODE = [w for w in workloads() if w["metadata"]["name"] != NODE]


@pytest.mark.parametrize("workload", NOT_NODE, ids=_ids(NOT_NODE))
def test_runs_as_a_user_other_than_root(workload: dict[str, Any]) -> None:
    name = workload["metadata"]["name"]
    pod = workload["spec"]["template"]["spec"]
    for _, c in _containers(pod):
        if (name, c["name"]) == CHOWN_INIT:
            continue
        where = f"{name}/{c['name']}"
        assert _effective(pod, c, "runAsNonRoot") is True, where
        uid, gid = _effective(pod, c, "runAsUser"), _effective(pod, c, "runAsGroup")
        assert isinstance(uid, int) and uid > 0, where
        assert gid is None or (isinstance(gid, int) and gid > 0), where


@pytest.mark.parametrize("workload", workloads(), ids=_ids(workloads()))
def test_writable_paths_are_volumes(workload: dict[str, Any]) -> None:
    """A read-only root filesystem: every path a cloudfs process writes is a volume."""
    pod = workload["spec"]["template"]["spec"]
    volumes = {v["name"] for v in pod.get("volumes", [])}
    claims = {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])}
    for _, c in _containers(pod):
        if not c.get("securityContext", {}).get("readOnlyRootFilesystem"):
            continue
        mounts = {m["mountPath"].rstrip("/"): m for m in c.get("volumeMounts", [])}
        for m in mounts.values():
            assert m["name"] in volumes | claims, f"{c['name']}: {m['name']} is no volume"
        args = c.get("args", [])
        if c.get("command") != ["cloudfs"] and not any(a.startswith("--mode=") for a in args):
            continue  # a sidecar or the chown: writes nothing but its socket or the owner
        assert "/tmp" in mounts and not mounts["/tmp"].get("readOnly"), c["name"]
        for arg in args:
            for flag in filter(arg.startswith, WRITABLE_FLAGS):
                path = arg[len(flag) :].lstrip("/")
                holder = [p for p in mounts if ("/" + path).startswith(p + "/") or "/" + path == p]
                assert holder, f"{c['name']}: {arg} is on the read-only root filesystem"
                assert not mounts[max(holder, key=len)].get("readOnly"), f"{c['name']}: {arg}"


# ---- NetworkPolicies ----


def _selected(selector: dict[str, Any]) -> set[str]:
    """The workloads of the namespace whose pods ``selector`` picks."""
    return {
        w["metadata"]["name"]
        for w in workloads()
        if selector_matches(selector, w["spec"]["template"]["metadata"].get("labels", {}))
    }


def _policies() -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for _, d in DOCS if d["kind"] == "NetworkPolicy"}


def _allowed(policy: dict[str, Any]) -> dict[int, set[str]]:
    """Port -> the workloads of the namespace allowed in (``ns:LABELS`` for namespaces,
    ``*`` for a rule without ``from``: any source)."""
    out: dict[int, set[str]] = {}
    for rule in policy["spec"].get("ingress", []):
        peers: set[str] = set() if "from" in rule else {ANYONE}
        for peer in rule.get("from", []):
            assert "ipBlock" not in peer
            if "namespaceSelector" in peer and "podSelector" in peer:
                assert peer["namespaceSelector"] == {}  # pods of any namespace, by label
                peers.add(f"pods:{sorted(peer['podSelector']['matchLabels'].items())}")
            elif "namespaceSelector" in peer:
                peers.add(f"ns:{sorted(peer['namespaceSelector']['matchLabels'].items())}")
            else:
                peers |= _selected(peer["podSelector"])
        for port in rule["ports"]:
            assert port.get("protocol", "TCP") == "TCP"
            out.setdefault(int(port["port"]), set()).update(peers)
    return out


def _container_ports(workload: str) -> set[int]:
    w = next(w for w in workloads() if w["metadata"]["name"] == workload)
    return {
        p["containerPort"] for c in w["spec"]["template"]["spec"]["containers"]
        for p in c.get("ports", [])
    }  # fmt: skip


def test_ingress_is_denied_by_default() -> None:
    policies = _policies()
    deny = policies["cloudfs-default-deny-ingress"]
    assert deny["metadata"]["namespace"] == NAMESPACE
    assert deny["spec"]["podSelector"] == {} and deny["spec"]["policyTypes"] == ["Ingress"]
    assert "ingress" not in deny["spec"]
    assert _selected(deny["spec"]["podSelector"]) == {w["metadata"]["name"] for w in workloads()}
    for policy in policies.values():
        assert policy["metadata"]["namespace"] == NAMESPACE
        assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress stays open


def test_only_mounts_and_their_peers_reach_the_tree_service() -> None:
    policy = _policies()["cloudfs-meta-clients"]
    assert _selected(policy["spec"]["podSelector"]) == {"cloudfs-meta"}
    grpc_port = one("Service", "cloudfs-meta")["spec"]["ports"][0]["port"]
    assert _allowed(policy) == {
        grpc_port: {
            NODE, "cloudfs-csi-controller", "cloudfs-cache", "cloudfs-cache-node",
            "cloudfs-scheduler-extender",  # asks for the nodes' cached bytes
            "cloudfs-data-readiness",  # the same, and which volumes exist
            SIDECARS,  # sidecar mode's mounts, in the training pods
        }
    }  # fmt: skip
    assert set(_allowed(policy)) <= _container_ports("cloudfs-meta")
    names = policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchExpressions"][0]
    assert "cloudfs-gateway" in names["values"]  # a gateway, when deployed, is let in too


def test_only_mounts_and_workers_reach_the_cache_workers() -> None:
    policy = _policies()["cloudfs-cache-clients"]
    assert _selected(policy["spec"]["podSelector"]) == {"cloudfs-cache", "cloudfs-cache-node"}
    allowed = _allowed(policy)
    grpc_port = next(
        p["port"] for p in one("Service", "cloudfs-cache")["spec"]["ports"] if p["name"] == "grpc"
    )
    assert allowed[grpc_port] == {NODE, "cloudfs-cache", "cloudfs-cache-node", SIDECARS}
    assert allowed[9464] == {"ns:[('cloudfs.io/prometheus', 'true')]"}  # metrics only
    assert set(allowed) == {grpc_port, 9464}
    for worker in ("cloudfs-cache", "cloudfs-cache-node"):
        assert set(allowed) <= _container_ports(worker)


def test_nothing_else_is_reachable() -> None:
    """The node plugin and the controller serve nothing over the network (kubelet
    speaks to them through UNIX sockets; its probes come from the node)."""
    reachable = set()
    for policy in _policies().values():
        reachable |= (
            _selected(policy["spec"]["podSelector"]) if policy["spec"].get("ingress") else set()
        )
    assert reachable == {
        "cloudfs-meta", "cloudfs-cache", "cloudfs-cache-node", "cloudfs-scheduler-extender",
        "cloudfs-sidecar-webhook",
    }  # fmt: skip


def test_only_the_cloudfs_scheduler_reaches_the_extender() -> None:
    policy = _policies()["cloudfs-scheduler-extender-clients"]
    assert _selected(policy["spec"]["podSelector"]) == {"cloudfs-scheduler-extender"}
    port = one("Service", "cloudfs-scheduler-extender")["spec"]["ports"][0]["port"]
    assert _allowed(policy) == {port: {"cloudfs-scheduler"}}
    assert set(_allowed(policy)) <= _container_ports("cloudfs-scheduler-extender")


def test_only_the_webhook_port_is_open_to_the_api_server() -> None:
    """The API server's address is no pod's: the sidecar webhook's 8443 is open to any
    source (it serves TLS and AdmissionReviews only), and nothing else of its pods."""
    policy = _policies()["cloudfs-sidecar-webhook-clients"]
    assert _selected(policy["spec"]["podSelector"]) == {"cloudfs-sidecar-webhook"}
    assert _allowed(policy) == {8443: {ANYONE}}
    assert set(_allowed(policy)) == _container_ports("cloudfs-sidecar-webhook")
    for name, other in _policies().items():
        if name != "cloudfs-sidecar-webhook-clients":
            assert all(ANYONE not in peers for peers in _allowed(other).values()), name


# ---- TLS ----


def _source(pod: dict[str, Any], container: Container, path: str) -> dict[str, Any]:
    """The volume a file path lies on in ``container`` (mounted read-only)."""
    (mount,) = [
        m for m in container["volumeMounts"]
        if f"{path}/".startswith(m["mountPath"].rstrip("/") + "/")
    ]  # fmt: skip
    assert mount.get("readOnly") is True, path
    return next(v for v in pod["volumes"] if v["name"] == mount["name"])  # type: ignore[no-any-return]


def test_tls_files_are_mounted_where_the_flags_point() -> None:
    pod = one("StatefulSet", "cloudfs-meta")["spec"]["template"]["spec"]
    (meta,) = pod["containers"]
    flags = dict(a.split("=", 1) for a in meta["args"] if a.startswith("--tls-"))
    assert set(flags) == {"--tls-cert", "--tls-key"}
    for path in flags.values():
        assert _source(pod, meta, path)["secret"]["secretName"] == "cloudfs-meta-tls"
    node = one("DaemonSet", NODE)["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in node["containers"]}
    (ca,) = [a.split("=", 1)[1] for a in containers["cloudfs-csi"]["args"]
             if a.startswith("--tls-ca-file=")]  # fmt: skip
    # The mount processes run in the mounter, the volume check before a mount in the
    # driver: the CA is the same path in both.
    for name in ("cloudfs-mounter", "cloudfs-csi"):
        assert _source(node, containers[name], ca)["configMap"]["name"] == "cloudfs-ca"
    # The controller's CreateVolume/DeleteVolume trust the tree service with the same CA.
    controller_pod = one("Deployment", "cloudfs-csi-controller")["spec"]["template"]["spec"]
    (controller,) = [c for c in controller_pod["containers"] if c["name"] == "cloudfs-csi"]
    (ca,) = [a.split("=", 1)[1] for a in controller["args"] if a.startswith("--tls-ca-file=")]
    assert _source(controller_pod, controller, ca)["configMap"]["name"] == "cloudfs-ca"
