"""The extender's HTTP server: ``POST <prefix>/filter`` and ``<prefix>/prioritize``.

JSON in, JSON out, as ``wire.py`` describes. A body that is not an
``ExtenderArgs`` is answered 400 with an ``ExtenderFilterResult`` whose
``Error`` says why (kube-scheduler reports the status code). ``GET /healthz``
answers ``ok`` for probes. One thread per connection; each connection's
socket times out after ``SOCKET_TIMEOUT`` seconds, and bodies over
``MAX_BODY`` bytes are refused (413).
"""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cloudfs.k8s.extender import Extender
from cloudfs.k8s.wire import BadRequest, error_answer, filter_answer, parse_args, priority_answer
from cloudfs.lib.http_server import send

log = logging.getLogger(__name__)

MAX_BODY = 64 << 20  # a NodeList of 5,000 nodes is a few tens of MB
SOCKET_TIMEOUT = 30.0
FILTER_VERB = "filter"
PRIORITIZE_VERB = "prioritize"


class ExtenderServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], extender: Extender, prefix: str = "") -> None:
        """``prefix``: the path before the verbs (``/cloudfs`` -> ``/cloudfs/filter``)."""
        self.extender = extender
        self.prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: ExtenderServer
    timeout = SOCKET_TIMEOUT
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._send(200, b"ok\n", "text/plain")
        else:
            self._send(404, b"not found\n", "text/plain")

    def do_POST(self) -> None:
        verb = self.path.split("?")[0]
        prefix = self.server.prefix
        if not verb.startswith(prefix + "/"):
            self._send(404, b"not found\n", "text/plain")
            return
        verb = verb[len(prefix) + 1 :]
        if verb not in (FILTER_VERB, PRIORITIZE_VERB):
            self._send(404, b"not found\n", "text/plain")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._json(411, error_answer("Content-Length is required"))
            return
        if not 0 <= length <= MAX_BODY:
            self._json(413, error_answer(f"body over {MAX_BODY} bytes"))
            return
        try:
            args = parse_args(json.loads(self.rfile.read(length)))
        except (ValueError, BadRequest) as exc:  # JSONDecodeError and UnicodeError too
            log.warning("%s: bad request: %s", verb, exc)
            self._json(400, error_answer(f"bad ExtenderArgs: {exc}"))
            return
        extender = self.server.extender
        if verb == FILTER_VERB:
            self._json(200, filter_answer(args, extender.filter(args)))
        else:
            self._json(200, priority_answer(extender.prioritize(args)))

    def _json(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        send(self, status, body, content_type)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)
