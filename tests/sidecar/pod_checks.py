"""Checks of a patched pod: the Kubernetes 1.33 schema (kubernetes-validate, strict) and the
API server's own validation rules that a schema cannot say, and the injected command lines
through the real ``cloudfs`` parser."""

from __future__ import annotations

from typing import Any

import pytest

from cloudfs.cli.main import build_parser
from cloudfs.cli.mount_options import apply_o_options

K8S_VERSION = "1.33.0"
DNS_LABEL_MAX = 63


def validate_pod(pod: dict[str, Any]) -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate")
    kv.validate(pod, K8S_VERSION, strict=True)
    spec = pod["spec"]
    volumes = [v["name"] for v in spec.get("volumes", [])]
    assert len(volumes) == len(set(volumes)), f"volume names repeat: {volumes}"
    init = spec.get("initContainers", [])
    containers = [*init, *spec["containers"]]
    names = [c["name"] for c in containers]
    assert len(names) == len(set(names)), f"container names repeat: {names}"
    for container in containers:
        assert len(container["name"]) <= DNS_LABEL_MAX
        privileged = (container.get("securityContext") or {}).get("privileged") is True
        for mount in container.get("volumeMounts", []):
            assert mount["name"] in volumes, f"{container['name']}: no volume {mount['name']}"
            if mount.get("mountPropagation") == "Bidirectional":
                # validation.go: "Bidirectional mount propagation is available only to
                # privileged containers"
                assert privileged, f"{container['name']}: Bidirectional without privileged"
        for env in container.get("env", []):
            assert "value" not in env or not env["name"].startswith(("AWS_", "CLOUDFS_"))
    for container in spec["containers"]:
        assert "restartPolicy" not in container  # only init containers may set it
    for container in init:
        assert container.get("restartPolicy", "Always") == "Always"
        if "startupProbe" in container:  # only sidecars (restartPolicy Always) may probe
            assert container.get("restartPolicy") == "Always"


def parse_command(command: list[str]) -> Any:
    """``command`` (``cloudfs VERB ...``) through the real parser, ``-o`` items folded in."""
    assert command[0] == "cloudfs"
    args = build_parser().parse_args(command[1:])
    if command[1] == "mount":
        apply_o_options(args)
    return args


def sidecars(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        c for c in pod["spec"].get("initContainers", []) if c.get("restartPolicy") == "Always"
    ]
