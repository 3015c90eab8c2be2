"""deploy/sidecar/make-certs.sh makes what the API server needs to call the webhook: a
serving certificate for the Service's name, signed by the CA it patches in as caBundle.
The real webhook server serves it, and a client that trusts only that CA and checks the
name the API server uses reviews the example pod through it (no cluster: --no-kubectl).
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("yaml", reason="needs PyYAML (csi-driver[test])")

from cloudfs.sidecar import review, server, settings
from cloudfs.sidecar.server import WebhookServer
from cloudfs.tls import load_server_tls
from tests.csi.manifest_api import deploy_webhook
from tests.csi.manifests import DEPLOY, job_pod, one

SCRIPT = DEPLOY / "sidecar" / "make-certs.sh"
TIMEOUT = 10.0
EXAMPLE = "resnet50-train-sidecar"  # deploy/examples/sidecar-training.yaml


def _service_host() -> str:
    ref = one("MutatingWebhookConfiguration", "cloudfs-sidecar")["webhooks"][0]["clientConfig"]
    return f"{ref['service']['name']}.{ref['service']['namespace']}.svc"


def test_the_script_parses_and_names_the_deployed_objects() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True, timeout=TIMEOUT)
    text = SCRIPT.read_text()
    names = dict(re.findall(r"^([A-Z_]+)=(\S+)$", text, re.MULTILINE))
    service = one("Service", names["SERVICE"])
    assert service["metadata"]["namespace"] == names["NAMESPACE"]
    assert f"{names['SERVICE']}.{names['NAMESPACE']}.svc" == _service_host()
    one("Deployment", names["DEPLOYMENT"])
    hooks = one("MutatingWebhookConfiguration", names["WEBHOOK_CONFIG"])["webhooks"]
    assert "/webhooks/0/clientConfig/caBundle" in text and hooks[0]["name"] == "sidecar.cloudfs.io"
    volumes = one("Deployment", names["DEPLOYMENT"])["spec"]["template"]["spec"]["volumes"]
    assert names["SECRET"] in [v.get("secret", {}).get("secretName") for v in volumes]
    assert "cert-manager.io/inject-ca-from" in text


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("needs openssl")
    out = tmp_path_factory.mktemp("certs") / "webhook"
    subprocess.run(["bash", str(SCRIPT), "--dir", str(out), "--no-kubectl"], check=True,
                   capture_output=True, timeout=60)  # fmt: skip
    return out


def test_a_second_run_renews_the_certificate_and_keeps_the_ca(certs: Path) -> None:
    ca, cert = (certs / "ca.crt").read_bytes(), (certs / "tls.crt").read_bytes()
    done = subprocess.run(["bash", str(SCRIPT), "--dir", str(certs), "--no-kubectl"],
                          check=True, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "reusing the CA" in done.stdout
    assert (certs / "ca.crt").read_bytes() == ca and (certs / "tls.crt").read_bytes() != cert
    assert (certs / "ca.key").stat().st_mode & 0o077 == 0


@pytest.fixture
def webhook_port(certs: Path) -> Iterator[int]:
    tls = load_server_tls(str(certs / "tls.crt"), str(certs / "tls.key"))
    assert tls is not None
    webhook, _ = deploy_webhook(settings.WebhookConfig(image="ghcr.io/cloudfs/cloudfs-csi:0.1.0"))
    hook = WebhookServer(webhook, "127.0.0.1:0", tls)
    hook.start()
    try:
        yield hook.port
    finally:
        hook.stop()


def _call(port: int, ca: Path, host: str, method: str, path: str, body: Any = None) -> Any:
    """An HTTPS request as the API server makes it: trusting caBundle alone, to ``host``."""
    context = ssl.create_default_context(cafile=str(ca))
    raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    with context.wrap_socket(raw, server_hostname=host) as tls:
        data = json.dumps(body).encode() if body is not None else b""
        head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        tls.sendall(head.encode() + data)
        reply = http.client.HTTPResponse(tls)
        reply.begin()
        assert reply.status == 200, reply.read()
        payload = reply.read()
    return json.loads(payload) if method == "POST" else payload


def test_the_api_server_can_call_the_webhook(certs: Path, webhook_port: int) -> None:
    ca, host = certs / "ca.crt", _service_host()
    assert _call(webhook_port, ca, host, "GET", server.HEALTH_PATH) == b"ok\n"
    assert _call(webhook_port, ca, f"{host}.cluster.local", "GET", server.HEALTH_PATH)
    answer = _call(webhook_port, ca, host, "POST", server.MUTATE_PATH, {
        "apiVersion": review.API_VERSION, "kind": "AdmissionReview",
        "request": {"uid": "u2", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "operation": "CREATE", "namespace": "default", "object": job_pod(EXAMPLE)},
    })  # fmt: skip
    assert answer["response"]["uid"] == "u2" and answer["response"]["allowed"] is True
    assert answer["response"]["patchType"] == "JSONPatch"
    with pytest.raises(ssl.SSLCertVerificationError):  # a name the certificate lacks
        _call(webhook_port, ca, "cloudfs-sidecar-webhook.default.svc", "GET", server.HEALTH_PATH)
