"""A server process a test starts (``cloudfs scheduler extender``, ``cloudfs sidecar
webhook``): run until its ``/healthz`` answers 200, always stopped."""

from __future__ import annotations

import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

START_SECONDS = 20.0


@contextmanager
def running_http_service(
    cmd: list[str], base: str, context: ssl.SSLContext | None = None
) -> Iterator[str]:
    """Start ``cmd``, wait for ``base + /healthz``; yields ``base``; terminates it after."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=1, context=context) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                said = proc.stderr.read() if proc.stderr else ""
                raise RuntimeError(f"{' '.join(cmd[3:5])} did not start: {said}")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
