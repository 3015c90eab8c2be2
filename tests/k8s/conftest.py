"""A real tree service, real extender processes (``cloudfs scheduler extender``) on
127.0.0.1, and a fake Kubernetes API server holding one PVC and its PV."""

from __future__ import annotations

import json
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from testkit.http_service import running_http_service
from testkit.kube_api import running_fake_kube_api
from testkit.tree_server import TreeServer, running_tree_server

RECORDED = Path(__file__).parent / "recorded"
TIMEOUT = 10.0
JSON = "application/json"


def recorded(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((RECORDED / name).read_text())
    return body


def post(url: str, body: bytes) -> tuple[int, Any]:
    """POST ``body`` as kube-scheduler does (``Content-Type: application/json``)."""
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if exc.headers.get_content_type() == JSON else raw


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def running_extender(tree: str, *args: str) -> Iterator[str]:
    """``cloudfs scheduler extender`` on a free port; yields its base URL."""
    port = _free_port()
    cmd = [
        sys.executable, "-m", "cloudfs.cli.main", "scheduler", "extender",
        "--listen", f"127.0.0.1:{port}", "--tree", f"grpc://{tree}", *args,
    ]  # fmt: skip
    with running_http_service(cmd, f"http://127.0.0.1:{port}") as base:
        yield base


@pytest.fixture(scope="module")
def tree_server() -> Iterator[TreeServer]:
    with running_tree_server() as server:
        yield server


@pytest.fixture(scope="module")
def fake_kube_api() -> Iterator[str]:
    """PVC ml/imagenet bound to PV pvc-1234, a CloudFS CSI volume grpc://.../imagenet."""
    objects = {
        "/api/v1/namespaces/ml/persistentvolumeclaims/imagenet": {
            "kind": "PersistentVolumeClaim", "apiVersion": "v1",
            "metadata": {"name": "imagenet", "namespace": "ml"},
            "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "cloudfs",
                     "volumeName": "pvc-1234", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"},
        },
        "/api/v1/persistentvolumes/pvc-1234": {
            "kind": "PersistentVolume", "apiVersion": "v1", "metadata": {"name": "pvc-1234"},
            "spec": {"csi": {"driver": "csi.cloudfs.io",
                             "volumeHandle": "grpc://cloudfs-tree.cloudfs:7070/imagenet",
                             "volumeAttributes": {"storage.kubernetes.io/x": "y"}}},
        },
    }  # fmt: skip
    with running_fake_kube_api(objects) as api:
        yield api.url
