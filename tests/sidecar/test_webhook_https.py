"""``cloudfs sidecar webhook`` as a process: HTTPS only, recorded AdmissionReviews in, the
patched pod out (valid against the 1.33 schemas), a health endpoint, bad bodies answered
400, and user mistakes on its command line one line and a nonzero exit."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from testkit.certs import Certs
from testkit.http_service import running_http_service
from testkit.kube_api import FakeKubeApi, running_fake_kube_api
from testkit.servers import free_port
from tests.sidecar.cluster import objects, patch_of, training_review
from tests.sidecar.pod_checks import sidecars, validate_pod

CLI = [sys.executable, "-m", "cloudfs.cli.main"]
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def kube() -> Iterator[FakeKubeApi]:
    with running_fake_kube_api(objects()) as api:
        yield api


@pytest.fixture(scope="module")
def webhook(certs: Certs, kube: FakeKubeApi) -> Iterator[str]:
    port = free_port()
    cmd = [*CLI, "sidecar", "webhook", "--listen", f"127.0.0.1:{port}",
           "--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key),
           "--image", "ghcr.io/cloudfs/cloudfs-csi:0.1.0", "--kube-api", kube.url]  # fmt: skip
    context = ssl.create_default_context(cafile=str(certs.ca))
    with running_http_service(cmd, f"https://127.0.0.1:{port}", context) as base:
        yield base


def post(base: str, certs: Certs, body: bytes, path: str = "/mutate") -> tuple[int, bytes]:
    request = urllib.request.Request(
        base + path, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    context = ssl.create_default_context(cafile=str(certs.ca))
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_recorded_review_comes_back_as_a_valid_patched_pod(webhook: str, certs: Certs) -> None:
    review = training_review()
    status, body = post(webhook, certs, json.dumps(review).encode())
    assert status == 200
    answer: dict[str, Any] = json.loads(body)
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == review["request"]["uid"]
    pod = jsonpatch.apply_patch(review["request"]["object"], patch_of(answer))
    validate_pod(pod)
    assert [c["name"] for c in sidecars(pod)] == ["cloudfs-imagenet", "cloudfs-ckpt"]


def test_a_refusal_travels_as_an_admission_review(webhook: str, certs: Certs) -> None:
    review = training_review()
    review["request"]["object"]["metadata"]["annotations"]["cloudfs.io/inject-volumes"] = "x"
    status, body = post(webhook, certs, json.dumps(review).encode())
    response = json.loads(body)["response"]
    assert status == 200 and response["allowed"] is False
    assert response["status"]["code"] == 400 and "names x" in response["status"]["message"]


def test_bad_bodies_are_400_and_unknown_paths_404(webhook: str, certs: Certs) -> None:
    assert post(webhook, certs, b"{not json")[0] == 400
    status, body = post(webhook, certs, b'{"kind": "AdmissionReview"}')
    assert status == 400 and b"not an AdmissionReview of admission.k8s.io/v1" in body
    assert post(webhook, certs, b"{}", "/validate")[0] == 404


def test_it_speaks_only_tls(webhook: str) -> None:
    plain = webhook.replace("https://", "http://")
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(plain + "/healthz", timeout=TIMEOUT)


def test_user_mistakes_are_one_line_and_a_nonzero_exit(certs: Certs, tmp_path: Path) -> None:
    base = [*CLI, "sidecar", "webhook", "--image", "x", "--kube-api", "http://127.0.0.1:1"]
    tls = ["--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key)]
    for args, expected in (
        ([*tls, "--listen", "nowhere"], "--listen"),
        (["--listen", "127.0.0.1:0", "--tls-cert", str(tmp_path / "no.pem"),
          "--tls-key", str(certs.server_key)], "TLS certificate"),
        ([*tls, "--listen", "127.0.0.1:0", "--cache-size", "lots"], "invalid size"),
        ([*tls, "--listen", "127.0.0.1:0", "--cache-host-paths", "mnt"], "absolute"),
    ):
        result = subprocess.run([*base, *args], capture_output=True, text=True, timeout=30)
        assert result.returncode != 0, args
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], result.stderr
    probe = subprocess.run([*CLI, "sidecar", "probe", str(tmp_path)], capture_output=True,
                           text=True, timeout=30)  # fmt: skip
    assert probe.returncode == 1 and "not mounted yet" in probe.stderr
