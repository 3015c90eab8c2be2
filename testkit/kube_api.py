"""A fake Kubernetes API server on 127.0.0.1 for tests of the extender, the admission check
and the sidecar webhook: GET answers from a dict of paths (404 ``Status`` otherwise), POST
records the body and echoes it back (201). ``MemoryKubeApi``: the same without HTTP."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cloudfs.k8s.kube_api import KubeApiError


@dataclass
class FakeKubeApi:
    url: str
    objects: dict[str, Any]
    posted: list[tuple[str, Any]] = field(default_factory=list)  # (path, body)


class _Handler(BaseHTTPRequestHandler):
    api: FakeKubeApi

    def do_GET(self) -> None:
        body = self.api.objects.get(self.path.split("?")[0])
        self._json(200 if body is not None else 404, body or {"kind": "Status", "code": 404})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.api.posted.append((self.path, body))
        self._json(201, body)

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def running_fake_kube_api(objects: dict[str, Any]) -> Iterator[FakeKubeApi]:
    """Serves ``objects`` (path -> JSON object; the dict may be changed while it runs)."""
    api = FakeKubeApi("", objects)
    handler = type("Handler", (_Handler,), {"api": api})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()


class MemoryKubeApi:
    """The same in-process, for code that takes a ``KubeApi``-like object (the sidecar
    webhook): ``get`` answers a copy from ``objects`` (404 as ``KubeApiError`` with
    ``not_found``), ``create`` keeps what it is given in ``created``."""

    def __init__(self, objects: dict[str, Any]) -> None:
        self.objects = objects
        self.created: list[tuple[str, dict[str, Any]]] = []

    def get(self, path: str) -> dict[str, Any]:
        if path not in self.objects:
            raise KubeApiError(f"GET {path}: HTTP 404", not_found=True)
        found: dict[str, Any] = copy.deepcopy(self.objects[path])
        return found

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append((path, body))
        return body
