"""``serve_until_signal``: a server process's life, from start to SIGTERM or SIGINT.

``cloudfs meta serve``, ``cloudfs cache serve`` and ``cloudfs gateway s3`` stay
in the foreground (a service manager or Kubernetes runs them) and stop, after
the calls in flight, on SIGTERM or SIGINT.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Protocol

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Service(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


def serve_until_signal(*services: Service, ready: Callable[[], object] | None = None) -> None:
    """Start ``services`` in order, call ``ready`` (to say where they listen), wait for
    SIGTERM or SIGINT, then stop them in the reverse order: what was started after a
    server (a cache worker's group heartbeat) ends before the server stops answering.

    Each service started is stopped, the others' stops included, whatever fails in
    between (a later start, ``ready``, a stop). Called from the main thread (signal
    handlers are installed there); a signal while stopping is ignored."""
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    for number in SIGNALS:
        signal.signal(number, stop)
    with contextlib.ExitStack() as started:
        for service in services:
            service.start()
            started.callback(service.stop)
        if ready is not None:
            ready()
        stopping.wait()
