"""The data-readiness controller end to end: ``cloudfs scheduler admission-check --once``
against a fake Kubernetes API server on 127.0.0.1 (Kueue's objects as data, the PVC and
PV of the job's CloudFS volume, two nodes) and a real tree service holding the volume
and the cached bytes a mount reported for node-a. Half cached: the check stays Pending
with its progress and a warm-up Job is created on node-a; fully cached: Ready.

The first test reports the cached bytes itself (``CacheReportClient``); the second has
a real FUSE mount of the volume on the chosen node read the dataset, and its periodic
cache report through the tree service turns the check Ready."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from cloudfs.meta.client.cache_reports import CacheReportClient
from cloudfs.mount.cache_report import INTERVAL_ENV, NODE_ENV
from testkit.mounts import Backing, mounted, world_traversable_tmpdir
from testkit.tree_server import TreeServer

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


Cluster = tuple[str, str, type[_Api]]  # the API server's URL, the volume, its handler


@pytest.fixture()
def cluster(tree_server: TreeServer) -> Iterator[Cluster]:
    data = Path(tempfile.mkdtemp(prefix="cloudfs-ufs-"))
    try:
        with _fake_cluster(tree_server.new_volume(f"file://{data}")) as served:
            yield served
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _workload(volume: str, pods: int) -> dict[str, Any]:
    """The recorded Workload, its dataset 8 MiB of ``volume``, quota for ``pods`` pods."""
    path = Path(__file__).parent / "workloads" / "quota_reserved.json"
    workload: dict[str, Any] = json.loads(path.read_text())
    workload["metadata"]["annotations"]["cloudfs.io/dataset-bytes"] = f"{volume}=8Mi"
    workload["spec"]["podSets"][0]["count"] = pods
    workload["status"]["admission"]["podSetAssignments"][0]["count"] = pods
    return workload


@contextmanager
def _fake_cluster(uri: str, pods: int = 2) -> Iterator[Cluster]:
    """A fake API server whose Workload (``pods`` pods) reads the tree-service volume
    ``uri`` through a PVC, on two nodes of its flavor: node-b and node-a."""
    volume = uri.rsplit("/", 1)[1]
    workload = _workload(volume, pods)
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


@pytest.mark.fuse
@pytest.mark.slow
def test_the_check_turns_ready_once_a_real_mount_on_the_chosen_node_reads_the_dataset(
    tree_server: TreeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing reported by hand: with nothing cached the check is Pending and warms node-a
    (the node it picks for the one pod); a real FUSE mount of the volume with node-a's name
    then reads the dataset, its periodic cache report reaches the tree service, and the
    next pass turns the check Ready."""
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("FUSE tests need /dev/fuse and root")
    data = world_traversable_tmpdir("cloudfs-ufs-")
    reports = CacheReportClient(tree_server.address)  # only asked, as the controller asks
    try:
        _write_dataset(data, shards=4, size=2 * MIB)  # the Workload declares 8Mi
        uri = tree_server.new_volume(f"file://{data}")
        with _fake_cluster(uri, pods=1) as (api, volume, handler):
            assert reports.cached_bytes(volume) == {}
            _pass(api, tree_server.address)
            entry = _check_entry(handler)
            assert entry["state"] == "Pending", entry
            assert entry["message"] == "warming: 0% of 8 MiB cached on 1 node (ready at 80%)"
            assert _warmup_nodes(handler) == ["node-a"]

            handler.writes.clear()
            monkeypatch.setenv(NODE_ENV, "node-a")  # the CSI node plugin sets it
            monkeypatch.setenv(INTERVAL_ENV, "1")  # report every 1 s, not every 30 s
            with mounted(Backing(uri=uri, local_dir=data)) as mount:
                _read_dataset(mount.root, data)
                _wait_for_report(reports, volume, "node-a", at_least=math.ceil(0.8 * 8 * MIB))
                _pass(api, tree_server.address)  # while the mount's report is live
            entry = _check_entry(handler)
            assert entry["state"] == "Ready", entry
            assert entry["message"] == "ready: 100% of 8 MiB cached on 1 node"
    finally:
        reports.close()
        shutil.rmtree(data, ignore_errors=True)


def _write_dataset(root: Path, shards: int, size: int) -> None:
    for i in range(shards):
        path = root / "train" / f"shard-{i}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(os.urandom(size))


def _read_dataset(mounted_root: Path, source: Path) -> None:
    """Read every shard through the mount (what the warm-up Job or the job would do)."""
    for shard in sorted((mounted_root / "train").iterdir()):
        assert shard.read_bytes() == (source / "train" / shard.name).read_bytes()


def _wait_for_report(
    reports: CacheReportClient, volume: str, node: str, at_least: int, timeout: float = 30.0
) -> None:
    """Poll the tree service until ``node`` has reported ``at_least`` bytes of ``volume``."""
    deadline = time.monotonic() + timeout
    while (cached := reports.cached_bytes(volume).get(node, 0)) < at_least:
        assert time.monotonic() < deadline, f"{node} reported {cached} bytes after {timeout} s"
        time.sleep(0.5)


def _check_entry(handler: type[_Api]) -> dict[str, Any]:
    """Our entry in the one status patch of the Workload since ``handler.writes`` was cleared."""
    ((_, _, body),) = _status_writes(handler, "workloads")
    (entry,) = body["status"]["admissionChecks"]
    assert entry["name"] == CHECK
    return dict(entry)


def _warmup_nodes(handler: type[_Api]) -> list[str]:
    """The nodes of the warm-up Jobs created since ``handler.writes`` was cleared."""
    jobs = [body for method, _, _, body in handler.writes if method == "POST"]
    return sorted(job["spec"]["template"]["spec"]["nodeName"] for job in jobs)
