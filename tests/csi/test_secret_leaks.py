"""Secrets (tokens, AWS keys, TLS keys) never reach the driver's log, its gRPC errors or
``cloudfs stats``, on the failure paths too: a bad secret, a mount that fails, a repair
that fails, a tree service that refuses the token."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

import grpc
import pytest

from cloudfs_csi.csi.v1 import csi_pb2 as csi
from cloudfs_csi.fuse_process import FuseLauncher, RunResult
from cloudfs_csi.mounts import MountTable
from cloudfs_csi.node import NodeService
from cloudfs_csi.recovery import HealthLoop
from cloudfs_csi.server import Guarded
from cloudfs_csi.state import StateStore
from testkit.tree_server import TreeServer
from tests.csi.harness import Kubelet, capability

KEY_LINE = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
SECRETS = {
    "token": "tree-token-5d1f0c9e2b7a",
    "cacheToken": "cache-token-8e3a71c4f0d2",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLELEAKCHECK",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYLEAKCHECK",
    "ca.crt": "-----BEGIN CERTIFICATE-----\nMIIBcaCAcaCAcaCA\n-----END CERTIFICATE-----\n",
    "tls.crt": "-----BEGIN CERTIFICATE-----\nMIIBclientclient\n-----END CERTIFICATE-----\n",
    "tls.key": f"-----BEGIN PRIVATE KEY-----\n{KEY_LINE}\n-----END PRIVATE KEY-----\n",
}
NEEDLES = [v for k, v in SECRETS.items() if k not in ("ca.crt", "tls.crt")] + [KEY_LINE]


def _clean(text: str) -> None:
    for needle in NEEDLES:
        assert needle not in text


class Aborted(Exception):
    pass


class Context:
    """What ``Guarded`` needs of a ``grpc.ServicerContext``: ``abort``."""

    def __init__(self) -> None:
        self.details = ""

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        self.details = f"{code.name}: {details}"
        raise Aborted(self.details)


class Echo:
    """A mount that fails and says every secret it was given, its files' contents too."""

    def __init__(self, returncode: int = 1) -> None:
        self.returncode = returncode
        self.args: list[str] = []

    def run(self, args: list[str], env: dict[str, str], timeout: float) -> RunResult:
        self.args = args
        files = [args[i + 1] for i, a in enumerate(args) if a.endswith(("-file", "-key", "-ca"))]
        said = [*env.values(), *(Path(f).read_text() for f in files if Path(f).exists())]
        said += [KEY_LINE]  # one line of a PEM key, as an OpenSSL error would quote it
        return RunResult(self.returncode, "error: " + " | ".join(said))


def _node(tmp_path: Path, runner: Echo) -> NodeService:
    (tmp_path / "mountinfo").write_text("")
    return NodeService(
        node_id="n", store=StateStore(str(tmp_path / "state")),
        table=MountTable(str(tmp_path / "mountinfo")), launcher=FuseLauncher(runner),
        cache_root=str(tmp_path / "cache"),
    )  # fmt: skip


def _stage(node: NodeService, tmp_path: Path, secrets: dict[str, str], **context: str) -> str:
    ctx = Context()
    req = csi.NodeStageVolumeRequest(
        volume_id="v1", staging_target_path=str(tmp_path / "staging"),
        volume_capability=capability(flags=["cache_size=1G"]), secrets=secrets,
        volume_context={"uri": f"file://{tmp_path}", **context},
    )  # fmt: skip
    with contextlib.suppress(Aborted):
        Guarded(node).NodeStageVolume(req, ctx)
    return ctx.details


def test_a_failing_mount_says_no_secret(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    runner = Echo()
    details = _stage(_node(tmp_path, runner), tmp_path, SECRETS, cachePeers="10.0.0.1:7080")
    assert details.startswith("INTERNAL") and "failed" in details, details
    assert "--tls-key" in runner.args  # the material did reach the mount, as files
    _clean(details)
    _clean(caplog.text)
    _clean(" ".join(runner.args))


def test_a_bad_secret_says_which_key_not_what(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    half = {k: v for k, v in SECRETS.items() if k != "tls.crt"}
    details = _stage(_node(tmp_path, Echo(0)), tmp_path, {**half, "junk": "junk-value-1234"})
    assert details.startswith("INVALID_ARGUMENT") and "tls.key" in details, details
    _clean(details)
    _clean(caplog.text)
    assert "junk-value-1234" not in caplog.text and "junk" in caplog.text  # the key is named


def test_a_failing_repair_says_no_secret(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    runner = Echo(0)
    node = _node(tmp_path, runner)
    assert _stage(node, tmp_path, SECRETS) == ""  # staged (the fake mount "worked")
    runner.returncode = 1  # ... and then its process died, and the restart fails
    HealthLoop(node.staged, node.locked, node.repair, 60).check_all()
    assert "repair failed" in caplog.text
    _clean(caplog.text)


def test_the_request_log_strips_secrets(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    class Ok:
        def NodeGetInfo(self, req: Any) -> csi.NodeGetInfoResponse:
            return csi.NodeGetInfoResponse(node_id="n")

    req = csi.NodeStageVolumeRequest(volume_id="v", secrets=SECRETS)
    with pytest.raises(AttributeError):
        Guarded(Ok()).NodeStageVolume(req, Context())
    Guarded(Ok()).NodeGetInfo(req, Context())
    assert "***stripped***" in caplog.text
    _clean(caplog.text)


def test_stats_of_a_mount_with_a_token(
    kubelet: Kubelet, tree_server: TreeServer, base: Path
) -> None:
    """``cloudfs stats --json`` of a mount the driver started with a token and AWS keys."""
    token = tree_server.token
    assert token is not None
    ufs = base / "bucket"
    ufs.mkdir()
    uri = tree_server.new_volume(f"file://{ufs}")
    secrets = {"token": token, "AWS_SECRET_ACCESS_KEY": SECRETS["AWS_SECRET_ACCESS_KEY"]}
    staging = kubelet.stage(uri, {"uri": uri}, secrets=secrets)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "cloudfs.cli.main", "stats", str(staging), "--json"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert '"fuse"' in result.stdout
        for text in (result.stdout, result.stderr, kubelet.driver.log()):
            assert token not in text and SECRETS["AWS_SECRET_ACCESS_KEY"] not in text
        mount_log = next(Path(kubelet.driver.base).rglob("mount.log"), None)
        if mount_log is not None:
            text = mount_log.read_text()
            assert token not in text and SECRETS["AWS_SECRET_ACCESS_KEY"] not in text
    finally:
        kubelet.unstage(uri, staging)
