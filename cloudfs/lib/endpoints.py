"""``HOST:PORT`` on the command line (listen addresses, cache-group members), and the
Prometheus endpoint of ``--metrics HOST:PORT``."""

from __future__ import annotations

import socket

from prometheus_client import start_http_server

from cloudfs.errors import StartupError, UsageError
from cloudfs.metrics import Metrics


def parse_host_port(text: str, what: str, *, default_host: str | None = None) -> tuple[str, int]:
    """``"10.0.0.5:7080"`` -> ``("10.0.0.5", 7080)``; ``"[::1]:7080"`` keeps its brackets.

    ``default_host``: the host of ``":PORT"`` (otherwise a host is required).
    Raises ``UsageError`` naming ``what`` (the flag) for anything else.
    """
    host, sep, port = text.strip().rpartition(":")
    if not host and default_host is not None:
        host = default_host
    if not sep or not host or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise UsageError(f"{what} wants HOST:PORT, not {text!r}")
    return host, int(port)


def check_can_listen(host: str, port: int) -> None:
    """Raise ``StartupError`` (one line) if ``host:port`` cannot be listened on now: a port
    in use, an address not of this host, a name that does not resolve.

    Servers check first because gRPC's own refusal also prints a C-core log line.
    """
    where = f"{host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do
            probe.bind(address)
    except OSError as e:  # socket.gaierror included
        raise StartupError(f"cannot listen on {where}: {e.strerror or e}") from None


def parse_members(text: str, what: str) -> tuple[str, ...]:
    """``"h1:7080,h2:7080"`` (or ``+`` between them, for ``-o``) -> each ``HOST:PORT``."""
    members = []
    for item in text.replace("+", ",").split(","):
        if item.strip():
            host, port = parse_host_port(item, what)
            if port == 0:
                raise UsageError(f"{what}: {item.strip()!r} has no port")
            members.append(f"{host}:{port}")
    if not members:
        raise UsageError(f"{what} wants HOST:PORT[,HOST:PORT...], not {text!r}")
    return tuple(dict.fromkeys(members))  # in order, each once


def serve_metrics(address: str, metrics: Metrics) -> None:
    """Serve ``metrics`` to Prometheus on ``--metrics HOST:PORT`` (``:PORT``: loopback)."""
    host, port = parse_host_port(address, "--metrics", default_host="127.0.0.1")
    try:
        start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as e:
        raise StartupError(f"cannot serve metrics on {address}: {e.strerror or e}") from None
