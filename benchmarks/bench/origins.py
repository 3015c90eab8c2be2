"""The S3 origins a benchmark can run against, and latency in front of one.

Two servers on 127.0.0.1: moto (Python, ``testkit.servers``), which every test uses, and
s3rver (Node.js, ``bench/s3rver.py``), which streams ranges from disk where moto reads the
whole object for every ranged GET, and which does not share a Python GIL with itself. A
figure measured against both shows what is the client's and what is the origin's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bench.s3rver import running_s3rver
from testkit.faults_proxy import running_proxy
from testkit.servers import running_s3_server


@dataclass(frozen=True)
class Origin:
    """An S3 server on 127.0.0.1 as the benchmark sees it."""

    name: str
    endpoint: str
    env: dict[str, str]  # a process environment with the server's credentials
    pid: int | None  # the server's process, for its CPU per pass (None: not a local process)


@contextlib.contextmanager
def moto_origin() -> Iterator[Origin]:
    """moto in server mode (testkit.servers), the origin every other benchmark here uses."""
    with running_s3_server() as s3:
        yield Origin("moto", s3.endpoint, s3.env(), s3.proc.pid)


@contextlib.contextmanager
def s3rver_origin() -> Iterator[Origin]:
    """s3rver (Node.js, from npm: bench/s3rver.py), which streams ranges from disk where
    moto reads the whole object for every ranged GET; it ignores If-Match on GET."""
    with running_s3rver() as s3:
        yield Origin("s3rver", s3.endpoint, s3.env(), s3.pid)


# name -> a context manager starting the origin.
ORIGINS: dict[str, Callable[[], contextlib.AbstractContextManager[Origin]]] = {
    "moto": moto_origin,
    "s3rver": s3rver_origin,
}


@contextlib.contextmanager
def behind_latency(origin: Origin, latency_ms: float) -> Iterator[Origin]:
    """``origin`` itself at 0 ms (no proxy in the path); else the faults proxy delaying every
    request by ``latency_ms`` in front of it (its threads run in this process)."""
    if latency_ms <= 0:
        yield origin
        return
    with running_proxy(origin.endpoint) as proxy:
        proxy.delay = latency_ms / 1000
        env = dict(origin.env)
        env["AWS_ENDPOINT_URL_S3"] = proxy.endpoint
        yield Origin(f"{origin.name}+{latency_ms:g}ms", proxy.endpoint, env, origin.pid)
