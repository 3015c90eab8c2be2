"""The webhook's HTTPS server: ``POST /mutate`` (AdmissionReview v1), ``GET /healthz``.

The API server calls webhooks over HTTPS only, so the server always serves
TLS (``--tls-cert``/``--tls-key``). A body that is not JSON or not an
AdmissionReview is answered 400 with a one-line reason; bodies over
``MAX_BODY`` are refused (413). Connections idle past ``IDLE_SECONDS`` are
closed and at most ``THREADS`` reviews run at once; each review's API calls
have their own timeouts (``KubeApi``), well inside the webhook's
``timeoutSeconds``.
"""

from __future__ import annotations

import json
import logging
from typing import Any, cast

from cloudfs.lib.http_server import ConnectionHandler, ThreadedHTTPServer, send
from cloudfs.sidecar.review import BadReview, Webhook
from cloudfs.tls import ServerTLS

log = logging.getLogger(__name__)

MAX_BODY = 8 << 20  # a pod is at most etcd's 1.5 MiB; the review wraps it once
IDLE_SECONDS = 30.0
THREADS = 16
MUTATE_PATH = "/mutate"
HEALTH_PATH = "/healthz"


class WebhookServer(ThreadedHTTPServer):
    def __init__(self, webhook: Webhook, address: str, tls: ServerTLS) -> None:
        """``address``: HOST:PORT (port 0 picks one: ``port``). ``OSError`` if it cannot listen."""
        super().__init__(
            address, _Handler, name="sidecar-webhook", threads=THREADS,
            idle_seconds=IDLE_SECONDS, tls=tls,
        )  # fmt: skip
        self.webhook = webhook


class _Handler(ConnectionHandler):
    server_version = "CloudFS-sidecar-webhook"

    @property
    def owner_server(self) -> WebhookServer:
        return cast(WebhookServer, self.owner)

    def do_GET(self) -> None:
        if self.path.split("?")[0] == HEALTH_PATH:
            self._send(200, b"ok\n", "text/plain")
        else:
            self._send(404, b"not found\n", "text/plain")

    def do_POST(self) -> None:
        if self.path.split("?")[0] != MUTATE_PATH:
            self._send(404, b"not found\n", "text/plain")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._send(411, b"Content-Length is required\n", "text/plain")
            return
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True
            self._send(413, f"body over {MAX_BODY} bytes\n".encode(), "text/plain")
            return
        raw = self.rfile.read(length)
        with self.owner_server.slot():
            try:
                answer = self.owner_server.webhook.review(json.loads(raw))
            except (ValueError, BadReview) as exc:  # JSONDecodeError and UnicodeError too
                log.warning("bad AdmissionReview from %s: %s", self.address_string(), exc)
                self._send(400, f"bad AdmissionReview: {exc}\n".encode(), "text/plain")
                return
            except Exception:
                log.exception("review failed")
                self._send(500, b"the webhook failed; see its log\n", "text/plain")
                return
        self._json(200, answer)

    def _json(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        send(self, status, body, content_type)
