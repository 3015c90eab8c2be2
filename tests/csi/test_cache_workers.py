"""deploy/'s cache workers: what they run parses as ``cloudfs cache serve``, and their
Secrets, Services, ports, group and tree service line up with the rest of deploy/.

(The schema check of every manifest is test_manifests.py's.)
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest

pytest.importorskip("yaml", reason="needs PyYAML (csi-driver[test])")

from cloudfs.cli import cache_serve
from cloudfs.lib.endpoints import parse_host_port
from cloudfs.sizes import parse_size
from cloudfs_csi.cache_group import validate_group
from tests.csi.manifests import one

GROUP_FLAGS = ("group", "meta_server", "meta_token_file", "advertise")
POD_NAME = "cloudfs-cache-1"
# The worker's own certificate, and the CA it trusts the tree service with (a worker's
# outgoing TLS is --meta-tls-*: --tls-ca is a mount's flag, which `cache serve` refuses).
TLS_FLAGS = ("--tls-cert", "--tls-key", "--meta-tls-ca")
WORKERS = [("StatefulSet", "cloudfs-cache"), ("DaemonSet", "cloudfs-cache-node")]


def _pod(kind: str, name: str) -> dict[str, Any]:
    return one(kind, name)["spec"]["template"]  # type: ignore[no-any-return]


def _worker(kind: str, name: str) -> dict[str, Any]:
    (container,) = _pod(kind, name)["spec"]["containers"]
    return container  # type: ignore[no-any-return]


def _serve_args(container: dict[str, Any]) -> tuple[argparse.Namespace, dict[str, str]]:
    """The container's args, ``$(VAR)`` expanded as kubelet does, through the real parser;
    the group flags (every one of them set) also as a dict."""
    assert container["command"] == ["cloudfs"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    values = {"POD_NAME": POD_NAME}
    args = [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], a) for a in container["args"]]
    parser = argparse.ArgumentParser(prog="cloudfs")
    cache_serve.add_parser(parser.add_subparsers(dest="command"))
    ns = parser.parse_args(args)  # every flag: one `cache serve` does not know exits
    assert (ns.command, ns.cache_command) == ("cache", "serve")
    group = {dest.replace("_", "-"): getattr(ns, dest) for dest in GROUP_FLAGS}
    assert all(v is not None for v in group.values()), f"every group flag is set: {group}"
    return ns, group


def _mount_of(container: dict[str, Any], pod: dict[str, Any], path: str) -> dict[str, Any]:
    """The pod volume mounted at the directory holding ``path``."""
    mounts = [
        m
        for m in container["volumeMounts"]
        if f"{path}/".startswith(m["mountPath"].rstrip("/") + "/")
    ]
    assert len(mounts) == 1, f"{path}: {mounts}"
    volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    return volumes.get(mounts[0]["name"], {"claim": mounts[0]["name"]})  # type: ignore[no-any-return]


def _port(container: dict[str, Any], port: int | str) -> int:
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    return named[port] if isinstance(port, str) else port


@pytest.mark.parametrize(("kind", "name"), WORKERS)
def test_worker_runs_cloudfs_cache_serve(kind: str, name: str) -> None:
    container, pod = _worker(kind, name), _pod(kind, name)
    ns, group = _serve_args(container)
    parse_size(ns.cache_size), parse_size(ns.memory_cache_size)
    _, listen = parse_host_port(ns.listen, "--listen")
    advertise_host, advertise = parse_host_port(group["advertise"], "--advertise")
    # The stable name of the pod (headless Service), as its TLS certificate names it.
    svc = one("Service", "cloudfs-cache")
    name = f"{POD_NAME}.{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local"
    assert (advertise_host, advertise) == (name, listen)
    assert pod["spec"].get("subdomain", svc["metadata"]["name"]) == svc["metadata"]["name"]
    # The probes and the Service reach the port it listens on; Prometheus the metrics one.
    for probe in ("readinessProbe", "livenessProbe"):
        assert _port(container, container[probe]["tcpSocket"]["port"]) == listen
    _, metrics = parse_host_port(ns.metrics, "--metrics")
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == metrics == _port(container, "metrics")
    # The tokens are files of the right Secrets; the blocks live on the cache volume.
    assert _mount_of(container, pod, ns.token_file)["secret"]["secretName"] == (
        "cloudfs-cache-token"
    )
    assert _mount_of(container, pod, group["meta-token-file"])["secret"]["secretName"] == (
        "cloudfs-meta-token"
    )
    assert ns.token_file.endswith("/token") and group["meta-token-file"].endswith("/token")
    assert "token" in one("Secret", "cloudfs-cache-token")["stringData"]
    cache = _mount_of(container, pod, ns.cache_dir)
    assert "secret" not in cache
    # TLS: the worker's certificate from a kubernetes.io/tls Secret, the CA from a ConfigMap.
    flags = dict(a.split("=", 1) for a in container["args"] if a.startswith(TLS_FLAGS))
    for flag in ("--tls-cert", "--tls-key"):
        assert _mount_of(container, pod, flags[flag])["secret"]["secretName"] == (
            "cloudfs-cache-tls"
        )
    assert _mount_of(container, pod, flags["--meta-tls-ca"])["configMap"]["name"] == "cloudfs-ca"
    assert ns.meta_tls_ca == flags["--meta-tls-ca"] and ns.tls_cert == flags["--tls-cert"]
    # S3 credentials from the volume Secret, as the mounts get them.
    volume_secret = one("Secret", "cloudfs-volume-secret")["stringData"]
    for e in container["env"]:
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            assert ref["name"] == "cloudfs-volume-secret" and ref["key"] in volume_secret
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= {e["name"] for e in container["env"]}
    assert container["resources"]["limits"]["memory"]


@pytest.mark.parametrize(("kind", "name"), WORKERS)
def test_worker_joins_the_group_the_storage_class_names(kind: str, name: str) -> None:
    _, group = _serve_args(_worker(kind, name))
    sc = one("StorageClass", "cloudfs-cached")["parameters"]
    assert group["group"] == validate_group(sc["cacheGroup"])
    assert group["meta-server"] == f"grpc://{sc['server']}"  # the tree service the volumes are on
    meta = one("Service", "cloudfs-meta")
    host, port = parse_host_port(sc["server"], "server")
    assert host.startswith(f"{meta['metadata']['name']}.{meta['metadata']['namespace']}.svc")
    assert port == meta["spec"]["ports"][0]["port"]
    assert "cacheToken" in one("Secret", "cloudfs-volume-secret")["stringData"]
    assert sc["csi.storage.k8s.io/node-stage-secret-name"] == "cloudfs-volume-secret"


def test_statefulset_service_and_claims() -> None:
    sts = one("StatefulSet", "cloudfs-cache")
    svc = one("Service", sts["spec"]["serviceName"])
    assert svc["spec"]["clusterIP"] == "None"  # headless: a stable name per worker
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()
    container = _worker("StatefulSet", "cloudfs-cache")
    ns, _ = _serve_args(container)
    _, listen = parse_host_port(ns.listen, "--listen")
    grpc_port = next(p for p in svc["spec"]["ports"] if p["name"] == "grpc")
    assert _port(container, grpc_port["targetPort"]) == listen
    # The disk tier keeps 10% of its filesystem free: --cache-size fits in 90% of the claim.
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert _mount_of(container, sts["spec"]["template"], ns.cache_dir) == {
        "claim": claim["metadata"]["name"]
    }
    storage = parse_size(claim["spec"]["resources"]["requests"]["storage"].removesuffix("i"))
    assert parse_size(ns.cache_size) <= 0.9 * storage


def test_cache_node_daemonset_stays_on_cache_nodes() -> None:
    pod = _pod("DaemonSet", "cloudfs-cache-node")["spec"]
    assert pod["nodeSelector"] == {"cloudfs.io/cache-node": "true"}
    ns, _ = _serve_args(_worker("DaemonSet", "cloudfs-cache-node"))
    cache = _mount_of(_worker("DaemonSet", "cloudfs-cache-node"), {"spec": pod}, ns.cache_dir)
    assert cache["hostPath"]["type"] == "DirectoryOrCreate"
