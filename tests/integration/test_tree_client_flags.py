"""Every command that calls the tree service names it, its token and its TLS files alike
(``cloudfs/cli/tree_flags.py``): ``--meta-server``, ``--meta-token-file``, ``--meta-tls-*``
or ``$CLOUDFS_META_SERVER``, ``$CLOUDFS_META_TOKEN``, ``$CLOUDFS_TLS_*``.

Each of ``volume *``, ``cache serve --group``, ``gateway s3``, ``scheduler extender`` and
``scheduler admission-check`` runs as a real process against a tree service that asks for
a token and client certificates (mTLS), and against a plaintext one; without the CA a
command says TLS in one line. The old spellings (``--server``, ``--meta``, ``--tree``,
the pure clients' ``--token-file`` and ``--tls-*``) still work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from cloudfs.meta.client.cache_reports import CacheReportClient
from cloudfs.meta.client.groups import GroupClient
from testkit.certs import Certs
from testkit.tree_server import TreeServer, running_tree_server
from tests.gateway.conftest import ACCESS_KEY, SECRET_KEY, gateway_command, gateway_env
from tests.integration.test_tls import server_flags, trusting
from tests.k8s.conftest import post, running_extender
from tests.k8s.test_admission_controller import _fake_cluster, _status_writes

TOKEN = "tree-token"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["mtls", "plaintext"])
def tree(request: pytest.FixtureRequest, certs: Certs) -> Iterator[TreeServer]:
    if request.param == "mtls":
        tls = trusting(certs, client_cert=True)
        with running_tree_server(token=TOKEN, args=server_flags(certs, mtls=True), tls=tls) as t:
            yield t
    else:
        with running_tree_server(token=TOKEN) as t:
            yield t


def flags(tree: TreeServer, certs: Certs) -> list[str]:
    """The one spelling: server, token file, and the client's TLS files when it serves TLS."""
    assert tree.token_file is not None
    given = ["--meta-server", f"grpc://{tree.address}", "--meta-token-file", tree.token_file]
    if tree.tls is not None:
        given += ["--meta-tls-ca", str(certs.ca), "--meta-tls-cert", str(certs.client_cert)]
        given += ["--meta-tls-key", str(certs.client_key)]
    return given


def cloudfs(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cloudfs.cli.main", *args]
    ours = ("CLOUDFS_META", "CLOUDFS_TLS")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, env={**clean, **(env or {})}
    )


def test_volume_commands(tree: TreeServer, certs: Certs) -> None:
    data = tempfile.mkdtemp(prefix="cloudfs-ufs-")
    given = flags(tree, certs)
    made = cloudfs("volume", "create", "flagvol", f"file://{data}", *given)
    assert made.returncode == 0, made.stderr
    listed = cloudfs("volume", "list", "--json", *given)
    assert listed.returncode == 0, listed.stderr
    assert "flagvol" in {v["name"] for v in json.loads(listed.stdout)}
    info = cloudfs("volume", "info", "flagvol", *given)
    assert info.returncode == 0 and info.stdout.startswith("flagvol\t"), info.stderr
    gone = cloudfs("volume", "delete", "flagvol", *given)
    assert gone.returncode == 0 and "deleted volume flagvol" in gone.stdout, gone.stderr


def test_volume_list_from_the_environment(tree: TreeServer, certs: Certs) -> None:
    env = {"CLOUDFS_META_SERVER": tree.address, "CLOUDFS_META_TOKEN": TOKEN}
    if tree.tls is not None:
        env.update(CLOUDFS_TLS_CA=str(certs.ca), CLOUDFS_TLS_CERT=str(certs.client_cert))
        env.update(CLOUDFS_TLS_KEY=str(certs.client_key))
    listed = cloudfs("volume", "list", env=env)
    assert listed.returncode == 0, listed.stderr


def test_the_old_spellings_still_work(tree: TreeServer, certs: Certs) -> None:
    assert tree.token_file is not None
    old = ["--server", tree.address, "--token-file", tree.token_file]
    if tree.tls is not None:
        old += ["--tls-ca", str(certs.ca), "--tls-cert", str(certs.client_cert)]
        old += ["--tls-key", str(certs.client_key)]
    listed = cloudfs("volume", "list", *old)
    assert listed.returncode == 0, listed.stderr


def test_without_the_ca_one_line_says_tls(tree: TreeServer, certs: Certs) -> None:
    if tree.tls is None:
        pytest.skip("the plaintext tree needs no CA")
    assert tree.token_file is not None
    started = time.monotonic()
    refused = cloudfs(
        "volume", "list", "--meta-server", tree.address, "--meta-token-file", tree.token_file
    )
    assert refused.returncode != 0
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "TLS" in lines[0] and "Traceback" not in refused.stderr, lines
    assert time.monotonic() - started < 30


def test_no_tree_service_named_is_one_line() -> None:
    missing = cloudfs("volume", "list")
    assert missing.returncode != 0
    assert missing.stderr.strip().count("\n") == 0 and "--meta-server" in missing.stderr


def test_a_cache_worker_joins_its_group_through_the_tree(tree: TreeServer, certs: Certs) -> None:
    work = Path(tempfile.mkdtemp(prefix="cloudfs-worker-"))
    command = [
        sys.executable, "-m", "cloudfs.cli.main", "cache", "serve", "--listen", "127.0.0.1:0",
        "--cache-dir", str(work / "cache"), "--no-token", "--group", "flags", *flags(tree, certs),
    ]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = GroupClient(tree.address, token=TOKEN, tls=tree.tls)
    try:
        deadline = time.monotonic() + 20
        while not client.members("flags"):
            assert proc.poll() is None and time.monotonic() < deadline, "never joined"
            time.sleep(0.2)
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=15)


def test_the_gateway_serves_the_trees_volumes(tree: TreeServer, certs: Certs) -> None:
    volume = tree.new_volume(f"file://{tempfile.mkdtemp(prefix='cloudfs-ufs-')}").rsplit("/")[-1]
    env = {k: v for k, v in gateway_env(tree).items() if k != "CLOUDFS_META_SERVER"}
    proc = subprocess.Popen(
        gateway_command("--listen", "127.0.0.1:0", *flags(tree, certs)),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "listening on HOST:PORT ..."
        address = next(w for w in line.split() if w.startswith("127.0.0.1:"))
        s3 = boto3.client(
            "s3", endpoint_url=f"http://{address}", aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
            config=Config(retries={"max_attempts": 1}),
        )  # fmt: skip
        assert volume in {b["Name"] for b in s3.list_buckets()["Buckets"]}
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_the_extender_scores_by_the_trees_reports(tree: TreeServer, certs: Certs) -> None:
    reports = CacheReportClient(tree.address, token=TOKEN, tls=tree.tls)
    try:
        reports.report("scored", "node-a", "mount-1", 1 << 30, ttl=60)
    finally:
        reports.close()
    pod = {"metadata": {"name": "p", "namespace": "ml",
                        "annotations": {"cloudfs.io/volumes": "scored"}}}  # fmt: skip
    body = json.dumps({"Pod": pod, "NodeNames": ["node-a", "node-b"]}).encode()
    extra = [*flags(tree, certs)[2:], "--no-kube-api"]  # running_extender gives --tree
    with running_extender(tree.address, *extra) as base:
        status, scores = post(base + "/prioritize", body)
    assert status == 200
    assert {s["Host"]: s["Score"] for s in scores}["node-a"] > 0, scores


def test_the_admission_check_reads_the_trees_reports(tree: TreeServer, certs: Certs) -> None:
    uri = tree.new_volume(f"file://{tempfile.mkdtemp(prefix='cloudfs-ufs-')}")
    with _fake_cluster(uri) as (api, volume, handler):
        reports = CacheReportClient(tree.address, token=TOKEN, tls=tree.tls)
        try:
            reports.report(volume, "node-a", "mount-1", 4 << 20, ttl=60)  # half of 8 MiB
        finally:
            reports.close()
        done = cloudfs(
            "scheduler", "admission-check", "--once", "--kube-api", api,
            "--warmup-image", "cloudfs:test", *flags(tree, certs),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        ((_, _, status),) = _status_writes(handler, "workloads")
        (entry,) = status["status"]["admissionChecks"]
        assert entry["message"].startswith("warming: 25% of 8 MiB"), entry
