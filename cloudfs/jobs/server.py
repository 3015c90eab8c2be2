"""The scheduler's API on a UNIX socket (mode 0600) in its state directory.

The JSON-lines framing of ``cloudfs.lib.jsonlines``: one JSON request
line per connection, one answer line, ``{"done": true, ...}`` or
``{"error": message, "errno": n}``. Requests: ``ping``, ``submit`` (``spec``:
the YAML text), ``list``, ``status`` (``id``), ``cancel`` (``id``), ``logs``
(``id``: the log files to read), ``report``. Connections are served on threads
(``socketserver``); each call takes the scheduler's lock.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import pwd
import socket
import socketserver
import struct
from pathlib import Path
from typing import Any

from cloudfs.errors import FsError
from cloudfs.jobs.record import JobRecord
from cloudfs.jobs.scheduler import Scheduler
from cloudfs.lib import jsonlines
from cloudfs.lib.jsonlines import Message, decode, encode, read_line

log = logging.getLogger(__name__)


def socket_path(state_dir: Path) -> Path:
    return state_dir / "scheduler.sock"


class SchedulerServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        path.unlink(missing_ok=True)
        old = os.umask(0o177)
        try:
            super().__init__(str(path), _Handler)
        finally:
            os.umask(old)


class _Handler(socketserver.StreamRequestHandler):
    server: SchedulerServer

    def handle(self) -> None:
        self.request.settimeout(30)
        try:
            request = decode(read_line(self.rfile))
            answer = jsonlines.done(
                _dispatch(self.server.scheduler, request, _peer_user(self.request))
            )
        except FsError as e:
            answer = jsonlines.error(str(e), e.errno)
        except ValueError as e:
            answer = jsonlines.error(str(e), errno.EINVAL)
        except Exception as e:
            log.exception("request failed")
            answer = jsonlines.error(f"internal error: {e}", errno.EIO)
        with contextlib.suppress(OSError):
            self.wfile.write(encode(answer))


def _dispatch(s: Scheduler, request: Message, user: str | None) -> dict[str, Any]:
    op = request.get("op")
    if op == "ping":
        return {"pid": os.getpid()}
    if op == "submit":
        text = request.get("spec")
        if not isinstance(text, str):
            raise FsError("submit needs 'spec', the job's YAML", errno=errno.EINVAL)
        return {"job": _view(s.submit(text, user=user))}
    if op == "list":
        return {"jobs": [_view(r) for r in s.jobs()]}
    if op == "report":
        return {"report": s.report()}
    job_id = request.get("id")
    if not isinstance(job_id, str):
        raise FsError(f"{op!r} needs 'id'" if op else "no 'op'", errno=errno.EINVAL)
    if op == "status":
        return {"job": _view(s.get(job_id)), "events": list(s.store.events(job_id))}
    if op == "cancel":
        return {"job": _view(s.cancel(job_id))}
    if op == "logs":
        return {"job": _view(s.get(job_id)), "files": s.logs(job_id)}
    raise FsError(f"unknown op {op!r}", errno=errno.EINVAL)


def _view(record: JobRecord) -> dict[str, Any]:
    data = record.to_json()
    data["name"] = record.spec.name
    return data


def _peer_user(sock: socket.socket) -> str | None:
    """The name of the user at the other end (SO_PEERCRED): a job's default ``user``."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", raw)
        return pwd.getpwuid(uid).pw_name
    except (OSError, KeyError):
        return None
