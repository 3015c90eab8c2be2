"""``cloudfs-csi mounter``: runs ``cloudfs mount``/``umount`` for the node driver.

In the node pod this runs in a container of its own, next to the driver's.
A container's restart ends every process in it; the FUSE processes started
here are therefore untouched when the driver's container restarts (a crash,
an OOM kill, a liveness failure), and the driver re-adopts them. When this
container restarts, the driver finds the mounts dead and repairs them
(``recovery.py``).

Protocol, on a UNIX socket only the pod can reach (mode 0600): one JSON line
per connection, ``{"args": [...], "env": {...}, "timeout": S}``, answered by
``{"returncode": N, "stderr": "..."}``. Only the ``mount`` and ``umount``
commands of the cloudfs CLI are run; ``env`` (credentials) is never logged.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import socketserver
import subprocess
import threading
from typing import Any

from cloudfs_csi.fuse_process import LocalRunner, RunResult
from cloudfs_csi.redact import scrub

log = logging.getLogger(__name__)

ALLOWED = frozenset({"mount", "umount"})
MAX_REQUEST = 1 << 20


class MounterClient:
    """A ``Runner`` that asks the mounter to run the command."""

    def __init__(self, path: str) -> None:
        self._path = path

    def run(self, args: list[str], env: dict[str, str], timeout: float) -> RunResult:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout + 10)
            sock.connect(self._path)
            request = {"args": args, "env": env, "timeout": timeout}
            sock.sendall(json.dumps(request).encode() + b"\n")
            reply = sock.makefile("rb").readline(MAX_REQUEST)
        if not reply:
            raise OSError(f"the mounter at {self._path} closed the connection")
        data = json.loads(reply)
        return RunResult(int(data["returncode"]), str(data.get("stderr", "")))


def handle(request: dict[str, Any], runner: LocalRunner) -> dict[str, Any]:
    args = request.get("args")
    env = request.get("env") or {}
    if not isinstance(args, list) or not args or args[0] not in ALLOWED:
        return {"returncode": 2, "stderr": "mounter: only cloudfs mount and umount are run"}
    if not all(isinstance(a, str) for a in args) or not isinstance(env, dict):
        return {"returncode": 2, "stderr": "mounter: bad request"}
    timeout = float(request.get("timeout", 120))
    log.info("running cloudfs %s", " ".join(args[:3]))
    try:
        result = runner.run(args, {str(k): str(v) for k, v in env.items()}, timeout)
    except subprocess.TimeoutExpired:
        return {"returncode": 124, "stderr": f"cloudfs {args[0]} timed out"}
    except OSError as exc:
        return {"returncode": 127, "stderr": f"cannot run cloudfs: {exc}"}
    if result.returncode != 0:
        log.warning("cloudfs %s failed: %s", args[0], scrub(result.stderr.strip(), env))
    return {"returncode": result.returncode, "stderr": result.stderr}


class _Handler(socketserver.StreamRequestHandler):
    server: MounterServer

    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST)
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except ValueError:
            reply: dict[str, Any] = {"returncode": 2, "stderr": "mounter: bad request"}
        else:
            reply = handle(request, self.server.runner)
        self.wfile.write(json.dumps(reply).encode() + b"\n")


class MounterServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, runner: LocalRunner) -> None:
        self.runner = runner
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(path):
            os.unlink(path)
        old = os.umask(0o177)
        try:
            super().__init__(path, _Handler)
        finally:
            os.umask(old)


def serve_forever(path: str, runner: LocalRunner, stop: threading.Event) -> None:
    server = MounterServer(path, runner)
    thread = threading.Thread(target=server.serve_forever, name="mounter", daemon=True)
    thread.start()
    log.info("mounter serving on %s", path)
    stop.wait()
    server.shutdown()
    server.server_close()
