"""The data-readiness controller end to end: ``cloudfs scheduler admission-check --once``
against a fake Kubernetes API server on 127.0.0.1 (Kueue's objects as data, the PVC and
PV of the job's CloudFS volume, two nodes) and a real tree service holding the volume
and the cached bytes a mount reported for node-a. Half cached: the check stays Pending
with its progress and a warm-up Job is created on node-a; fully cached: Ready."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from cloudfs.meta.cache_report import CacheReportClient
from tests.support.tree_server import TreeServer

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
CHECK = "cloudfs-data-ready"
MIB = 1 << 20


class _Api(BaseHTTPRequestHandler):
    objects: dict[str, Any]
    writes: list[tuple[str, str, str, Any]]

    def _answer(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        body = self.objects.get(self.path)
        self._answer(200 if body is not None else 404, body or {"kind": "Status", "code": 404})

    def _write(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length))
        self.writes.append((self.command, self.path, self.headers["Content-Type"], body))
        self._answer(201 if self.command == "POST" else 200, body)

    do_POST = do_PATCH = _write

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture()
def cluster(tree_server: TreeServer) -> Iterator[tuple[str, str, type[_Api]]]:
    data = tempfile.mkdtemp(prefix="cloudfs-ufs-")
    uri = tree_server.new_volume(f"file://{data}")
    volume = uri.rsplit("/", 1)[1]
    workload = json.loads((Path(__file__).parent / "workloads" / "quota_reserved.json").read_text())
    workload["metadata"]["annotations"]["cloudfs.io/dataset-bytes"] = f"{volume}=8Mi"
    node = {"kind": "Node", "apiVersion": "v1", "spec": {}}
    handler = type("Api", (_Api,), {"writes": [], "objects": {
        f"{KUEUE}/admissionchecks": {"kind": "AdmissionCheckList", "items": [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
             "metadata": {"name": CHECK, "generation": 1},
             "spec": {"controllerName": "cloudfs.io/data-readiness"}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
             "metadata": {"name": "provisioning", "generation": 1},
             "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}},
        ]},
        f"{KUEUE}/workloads": {"kind": "WorkloadList", "items": [workload]},
        f"{KUEUE}/resourceflavors/cloudfs-nodes": {
            "kind": "ResourceFlavor", "metadata": {"name": "cloudfs-nodes"},
            "spec": {"nodeLabels": {"cloudfs.io/node-plugin": "true"}}},
        "/api/v1/nodes?labelSelector=cloudfs.io%2Fnode-plugin%3Dtrue": {"kind": "NodeList",
            "items": [{**node, "metadata": {"name": n}} for n in ("node-b", "node-a")]},
        "/api/v1/namespaces/ml/persistentvolumeclaims/imagenet": {
            "kind": "PersistentVolumeClaim", "spec": {"volumeName": "pvc-1"}},
        "/api/v1/persistentvolumes/pvc-1": {"kind": "PersistentVolume", "spec": {"csi": {
            "driver": "csi.cloudfs.io", "volumeHandle": uri}}},
    }})  # fmt: skip
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", volume, handler
    finally:
        server.shutdown()
        server.server_close()


def _pass(api: str, tree: str) -> None:
    cmd = [
        sys.executable, "-m", "cloudfs.cli.main", "scheduler", "admission-check", "--once",
        "--kube-api", api, "--tree", f"grpc://{tree}", "--warmup-image", "cloudfs:test",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _status_writes(handler: type[_Api], kind: str) -> list[Any]:
    return [
        (urlsplit(path), ctype, body)
        for method, path, ctype, body in handler.writes
        if method == "PATCH" and f"/{kind}/" in path
    ]


def test_the_check_turns_ready_once_the_node_caches_the_dataset(
    tree_server: TreeServer, cluster: tuple[str, str, type[_Api]]
) -> None:
    api, volume, handler = cluster
    reports = CacheReportClient(tree_server.address)
    try:
        reports.report(volume, "node-a", "mount-1", 4 * MIB, ttl=60)  # half of 8 MiB
        _pass(api, tree_server.address)
        (active,) = _status_writes(handler, "admissionchecks")
        assert active[0].path == f"{KUEUE}/admissionchecks/{CHECK}/status"
        assert active[1] == "application/apply-patch+yaml"
        assert "fieldManager=cloudfs-data-readiness" in active[0].query
        assert active[2]["status"]["conditions"][0]["type"] == "Active"
        ((url, ctype, body),) = _status_writes(handler, "workloads")
        assert ctype == "application/apply-patch+yaml"
        assert url.path == f"{KUEUE}/namespaces/ml/workloads/job-resnet50-train-3f2a1/status"
        (entry,) = body["status"]["admissionChecks"]
        assert entry["name"] == CHECK and entry["state"] == "Pending"
        # two pods: node-a (half cached) and node-b (nothing) are warmed
        assert entry["message"] == "warming: 25% of 8 MiB cached on 2 nodes (ready at 80%)"
        jobs = [b for m, p, _, b in handler.writes if m == "POST"]
        assert {j["spec"]["template"]["spec"]["nodeName"] for j in jobs} == {"node-a", "node-b"}
        assert all(p == "/apis/batch/v1/namespaces/ml/jobs" for m, p, _, _ in handler.writes
                   if m == "POST")  # fmt: skip

        handler.writes.clear()
        reports.report(volume, "node-a", "mount-1", 8 * MIB, ttl=60)
        reports.report(volume, "node-b", "mount-2", 7 * MIB, ttl=60)
        _pass(api, tree_server.address)
        ((_, _, body),) = _status_writes(handler, "workloads")
        (entry,) = body["status"]["admissionChecks"]
        assert entry["state"] == "Ready", entry
        assert entry["message"] == "ready: 94% of 8 MiB cached on 2 nodes"
    finally:
        reports.close()
