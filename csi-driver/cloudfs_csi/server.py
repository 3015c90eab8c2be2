"""The gRPC server on the CSI UNIX socket: services wrapped with logging and error mapping.

Each call is logged with its secrets stripped (``redact.py``); a ``CsiError``
becomes its gRPC status, anything else INTERNAL with a pointer to the log.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc

from cloudfs_csi.csi.v1 import csi_pb2_grpc as csi_grpc
from cloudfs_csi.errors import CsiError
from cloudfs_csi.redact import to_log

log = logging.getLogger(__name__)

Handler = Callable[[Any, grpc.ServicerContext], Any]


class Guarded:
    """Exposes ``impl``'s RPC methods as gRPC servicer methods."""

    def __init__(self, impl: object) -> None:
        self._impl = impl

    def __getattr__(self, name: str) -> Handler:
        method = getattr(self._impl, name)

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            started = time.monotonic()
            try:
                log.info("%s request: %s", name, to_log(request))
                reply = method(request)
            except CsiError as exc:
                log.warning("%s failed: %s %s", name, exc.code.name, exc)
                context.abort(exc.code, str(exc))
            except Exception:
                log.exception("%s failed", name)
                context.abort(grpc.StatusCode.INTERNAL, f"{name}: internal error (see driver log)")
            log.info("%s done in %.3f s", name, time.monotonic() - started)
            return reply

        return call


def socket_path(endpoint: str) -> str:
    """The path of a ``unix:///path`` (or plain path) endpoint."""
    if endpoint.startswith("unix://"):
        path = endpoint[len("unix://") :]
    elif "://" in endpoint:
        raise ValueError(f"only unix:// endpoints are served, not {endpoint!r}")
    else:
        path = endpoint
    if not os.path.isabs(path):
        raise ValueError(f"the endpoint must be an absolute socket path, not {endpoint!r}")
    return path


def serve(
    endpoint: str,
    *,
    identity: object,
    node: object | None,
    controller: object | None,
    workers: int = 8,
) -> grpc.Server:
    """Start serving on ``endpoint`` (a stale socket file is replaced); returns the server."""
    path = socket_path(endpoint)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        if stat.S_ISSOCK(os.stat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    csi_grpc.add_IdentityServicer_to_server(Guarded(identity), server)  # type: ignore[no-untyped-call]
    if node is not None:
        csi_grpc.add_NodeServicer_to_server(Guarded(node), server)  # type: ignore[no-untyped-call]
    if controller is not None:
        csi_grpc.add_ControllerServicer_to_server(Guarded(controller), server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"unix://{path}")
    server.start()
    os.chmod(path, 0o660)
    log.info("serving CSI on unix://%s", path)
    return server
