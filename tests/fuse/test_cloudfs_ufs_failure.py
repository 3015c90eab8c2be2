"""When the UFS goes away, uncached reads fail with EIO in bounded time; cached ones still work.

Two ways to lose the bucket: the S3 server process stops (connections are
refused), or a proxy in front of it stops answering (a hung server).
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from testkit.faults_proxy import running_proxy
from testkit.mounts import Backing, mounted
from testkit.servers import S3Server, running_s3_server
from tests.fuse.conftest import _require_fuse

MiB = 1024 * 1024
EIO_BOUND_S = 60.0


def _stop_server(server: S3Server) -> None:
    """Stop moto now; the fixture's own cleanup still finds the (zombie) process group."""
    os.killpg(server.proc.pid, signal.SIGTERM)
    host, port = server.endpoint.split("//")[1].split(":")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError("moto server did not stop")


def _timed_read(path: Path, timeout: float) -> tuple[float, BaseException | bytes | None]:
    """Read ``path`` in a thread; (seconds taken, result or exception), None if still blocked."""
    result: list[BaseException | bytes] = []

    def run() -> None:
        try:
            result.append(path.read_bytes())
        except BaseException as e:
            result.append(e)

    t0 = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    took = time.monotonic() - t0
    return took, (result[0] if result else None)


def _populate(backing: Backing) -> dict[str, bytes]:
    files = {
        "cached.bin": os.urandom(MiB + 7),
        "uncached.bin": os.urandom(MiB + 9),
        "dir/uncached2.bin": os.urandom(300_000),
    }
    for key, data in files.items():
        backing.write_object(key, data)
    return files


@pytest.mark.slow
def test_stopped_s3_server_gives_eio_not_a_hang() -> None:
    _require_fuse()
    with running_s3_server() as server:
        bucket = "outage"
        server.client().create_bucket(Bucket=bucket)
        backing = Backing(uri=f"s3://{bucket}", s3=server, bucket=bucket)
        files = _populate(backing)
        with mounted(backing, ["--meta-ttl", "600", "--block-size", "256K"]) as m:
            r = m.root
            assert sorted(os.listdir(r)) == ["cached.bin", "dir", "uncached.bin"]
            assert os.listdir(r / "dir") == ["uncached2.bin"]
            assert (r / "cached.bin").read_bytes() == files["cached.bin"]
            with open(r / "cached.bin", "rb") as held:
                _stop_server(server)

                took, outcome = _timed_read(r / "uncached.bin", EIO_BOUND_S + 30)
                print(f"\nEIO after stopping the S3 server: {took:.2f}s")
                assert outcome is not None, f"read still blocked after {took:.0f}s"
                assert isinstance(outcome, OSError), f"read returned {type(outcome)}"
                assert outcome.errno == errno.EIO
                assert took < EIO_BOUND_S

                took2, outcome2 = _timed_read(r / "dir/uncached2.bin", EIO_BOUND_S + 30)
                print(f"second uncached read: {took2:.2f}s")
                assert isinstance(outcome2, OSError) and outcome2.errno == errno.EIO
                assert took2 < EIO_BOUND_S

                # what was read before is still served: by a handle held open ...
                held.seek(123_456)
                assert held.read(1000) == files["cached.bin"][123_456:124_456]
                # ... and by a new open
                assert (r / "cached.bin").read_bytes() == files["cached.bin"]
                assert os.stat(r / "uncached.bin").st_size == len(files["uncached.bin"])


@pytest.mark.slow
def test_hung_s3_endpoint_gives_eio_within_bound(s3_server: S3Server) -> None:
    _require_fuse()
    bucket = "hung-endpoint"
    s3_server.client().create_bucket(Bucket=bucket)
    backing = Backing(uri=f"s3://{bucket}", s3=s3_server, bucket=bucket)
    files = _populate(backing)
    with (
        running_proxy(s3_server.endpoint) as proxy,
        mounted(backing, ["--meta-ttl", "600", "--s3-endpoint", proxy.endpoint]) as m,
    ):
        r = m.root
        assert sorted(os.listdir(r)) == ["cached.bin", "dir", "uncached.bin"]
        assert (r / "cached.bin").read_bytes() == files["cached.bin"]
        proxy.mode = "blackhole"
        proxy.cut()
        try:
            took, outcome = _timed_read(r / "uncached.bin", EIO_BOUND_S)
            print(f"\nhung endpoint: read outcome after {took:.2f}s: {outcome!r:.80}")
            assert (r / "cached.bin").read_bytes() == files["cached.bin"]
            assert outcome is not None, f"read still blocked after {took:.0f}s"
            assert isinstance(outcome, OSError) and outcome.errno == errno.EIO
            assert took < EIO_BOUND_S
        finally:
            # unblock anything still waiting so that the unmount is quick
            proxy.mode = "refuse"
            proxy.cut()


@pytest.mark.slow
def test_cached_file_after_ttl_while_server_is_down() -> None:
    """Once the directory's TTL has run out, the tree still answers for files it knows."""
    _require_fuse()
    with running_s3_server() as server:
        bucket = "outage-ttl"
        server.client().create_bucket(Bucket=bucket)
        backing = Backing(uri=f"s3://{bucket}", s3=server, bucket=bucket)
        files = _populate(backing)
        with mounted(backing, ["--meta-ttl", "1"]) as m:
            r = m.root
            assert (r / "cached.bin").read_bytes() == files["cached.bin"]
            _stop_server(server)
            time.sleep(1.5)
            t0 = time.monotonic()
            took, outcome = _timed_read(r / "cached.bin", EIO_BOUND_S + 30)
            print(f"\ncached read after TTL, server down: {took:.2f}s -> {outcome!r:.60}")
            assert outcome == files["cached.bin"]
            assert time.monotonic() - t0 < EIO_BOUND_S
