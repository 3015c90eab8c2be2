"""Every cloudfs process in deploy/ is started with flags its real parser accepts, and
every server listening beyond loopback serves TLS.

``cloudfs meta serve``, ``cloudfs cache serve``, ``cloudfs gateway s3`` are parsed with
``cloudfs``'s own parser, the CSI driver's containers with ``cloudfs-csi``'s: a flag a
manifest passes that the program does not have fails here, not in a pod's crash loop.
(The cache workers' meaning of their flags is test_cache_workers.py's.)
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest

pytest.importorskip("yaml", reason="needs PyYAML (csi-driver[test])")

from cloudfs.cli.main import build_parser
from cloudfs.tls import is_loopback
from cloudfs_csi.main import parse_args as csi_parse_args
from tests.csi.manifests import DOCS

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
CSI_IMAGE = "ghcr.io/cloudfs/cloudfs-csi"
SERVERS = {("meta", "serve"), ("cache", "serve"), ("gateway", "s3")}
# What kubelet expands $(VAR) to, with values of the right shape.
ENV = {"POD_NAME": "pod-0", "NODE_NAME": "node-0", "CSI_ENDPOINT": "unix:///csi/csi.sock"}


def _containers() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for where, doc in DOCS:
        if doc["kind"] not in WORKLOAD_KINDS:
            continue
        spec = doc["spec"]["template"]["spec"]
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            if c["image"].startswith(CSI_IMAGE) and "args" in c:  # not the chown init
                out.append((f"{where}:{c['name']}", c))
    return out


CONTAINERS = _containers()


def _args(container: dict[str, Any]) -> list[str]:
    return [re.sub(r"\$\((\w+)\)", lambda m: ENV[m.group(1)], a) for a in container["args"]]


def _cloudfs(container: dict[str, Any]) -> argparse.Namespace:
    try:
        return build_parser().parse_args(_args(container))
    except SystemExit:
        pytest.fail(f"`cloudfs` refuses {container['args']}")


def _is_cloudfs(container: dict[str, Any]) -> bool:
    return container.get("command") == ["cloudfs"]


def test_every_cloudfs_container_is_checked() -> None:
    names = {where.rsplit(":", 1)[1] for where, _ in CONTAINERS}
    assert {"meta", "worker", "cloudfs-csi", "cloudfs-mounter"} <= names


@pytest.mark.parametrize(("where", "container"), CONTAINERS, ids=[w for w, _ in CONTAINERS])
def test_args_parse_with_the_real_parser(where: str, container: dict[str, Any]) -> None:
    if _is_cloudfs(container):
        _cloudfs(container)
    elif container.get("command") is None:  # the image's entry point: cloudfs-csi
        try:
            csi_parse_args(_args(container))
        except SystemExit:
            pytest.fail(f"{where}: `cloudfs-csi` refuses {container['args']}")
    else:
        pytest.fail(f"{where}: runs {container['command']}, which no test parses")


@pytest.mark.parametrize(("where", "container"), CONTAINERS, ids=[w for w, _ in CONTAINERS])
def test_servers_beyond_loopback_serve_tls(where: str, container: dict[str, Any]) -> None:
    """A server's --listen beyond loopback has --tls-cert and --tls-key; none relies on
    --insecure. (The --metrics listeners serve Prometheus text, no tokens or data, and are
    outside the rule, as in cloudfs itself.)"""
    if not _is_cloudfs(container):
        return
    ns = _cloudfs(container)
    if (ns.command, getattr(ns, f"{ns.command}_command", None)) not in SERVERS:
        return
    assert not ns.insecure, f"{where}: --insecure"
    if not is_loopback(ns.listen):
        assert ns.tls_cert and ns.tls_key, f"{where}: listens on {ns.listen} without TLS"
