"""s3rver (Node.js) as a second S3 origin for benchmarks.

Why a second origin: moto is Python, so on a 2-core machine its own GIL and CPU
shape every client figure measured against it. s3rver answers from Node.js and
its own files, so a client that looks fast only because moto is slow (or slow
only because moto serialises it) shows up as a difference between the two.

s3rver is installed once into a cache directory with npm (pinned version), and
:func:`running_s3rver` starts it on a free 127.0.0.1 port with a private data
directory. Every wait is bounded; a missing ``npm``/``node`` is one clear error.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERSION = "3.7.1"
DEFAULT_DIR = Path.home() / ".cache" / "cloudfs-bench" / "s3rver"
KEY = "S3RVER"  # s3rver's fixed access key and secret
REGION = "us-east-1"
INSTALL_TIMEOUT_S = 300.0
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


class S3rverError(RuntimeError):
    """s3rver could not be installed or started (the message is one line)."""


@dataclass(frozen=True)
class S3rver:
    endpoint: str
    pid: int | None = None  # the server's process (its CPU per pass)

    def env(self) -> dict[str, str]:
        """Environment for a process that talks to this server."""
        env = dict(os.environ)
        env.update(
            AWS_ACCESS_KEY_ID=KEY,
            AWS_SECRET_ACCESS_KEY=KEY,
            AWS_DEFAULT_REGION=REGION,
            AWS_ENDPOINT_URL_S3=self.endpoint,
        )
        return env


def binary(cache_dir: Path) -> Path:
    return cache_dir / "node_modules" / ".bin" / "s3rver"


def install(cache_dir: Path = DEFAULT_DIR) -> Path:
    """s3rver's launcher under ``cache_dir``, installed there first if it is not yet."""
    exe = binary(cache_dir)
    if exe.exists():
        return exe
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise S3rverError("s3rver needs Node.js and npm on PATH (apt-get install nodejs npm)")
    cache_dir.mkdir(parents=True, exist_ok=True)
    cmd = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache_dir)]
    try:
        subprocess.run(
            [*cmd, f"s3rver@{VERSION}"],
            check=True,
            capture_output=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except subprocess.CalledProcessError as err:
        last = (err.stderr or b"").decode(errors="replace").strip().splitlines()[-1:]
        raise S3rverError(f"npm install s3rver@{VERSION} failed: {' '.join(last)}") from None
    except subprocess.TimeoutExpired:
        raise S3rverError(
            f"npm install s3rver@{VERSION} took over {INSTALL_TIMEOUT_S:.0f} s"
        ) from None
    if not exe.exists():
        raise S3rverError(f"npm install s3rver@{VERSION} left no {exe}")
    return exe


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(endpoint: str) -> bool:
    """Any HTTP answer (s3rver lists buckets at /, or refuses unsigned: both will do)."""
    try:
        urllib.request.urlopen(endpoint + "/", timeout=2).read()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def _node_major() -> int:
    """The major version of ``node`` on PATH (0 if it cannot say)."""
    try:
        out = subprocess.run(
            ["node", "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
        return int(out.strip().lstrip("v").split(".")[0])
    except (OSError, subprocess.SubprocessError, ValueError):
        return 0


def _server_env() -> dict[str, str]:
    """s3rver's environment. Its ListObjectsV2 continuation tokens use a cipher that
    OpenSSL 3 keeps in the legacy provider: on Node 17 and later every listing past its
    first 1,000 keys fails with InternalError (ERR_OSSL_EVP_UNSUPPORTED) without it."""
    env = dict(os.environ)
    options = env.get("NODE_OPTIONS", "")
    if _node_major() >= 17 and "--openssl-legacy-provider" not in options:
        env["NODE_OPTIONS"] = f"{options} --openssl-legacy-provider".strip()
    return env


@contextmanager
def running_s3rver(cache_dir: Path = DEFAULT_DIR) -> Iterator[S3rver]:
    """s3rver on a free 127.0.0.1 port with a temporary data dir; stopped on exit."""
    exe = install(cache_dir)
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="s3rver-") as data:
        proc = subprocess.Popen(
            [str(exe), "-d", data, "-a", "127.0.0.1", "-p", str(port), "--silent"],
            env=_server_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _answers(endpoint):
                if proc.poll() is not None:
                    raise S3rverError(f"s3rver exited with status {proc.returncode}")
                if time.monotonic() > deadline:
                    raise S3rverError(f"s3rver did not answer within {START_TIMEOUT_S:.0f} s")
                time.sleep(0.1)
            yield S3rver(endpoint, proc.pid)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(STOP_TIMEOUT_S)


MARKER = ".s3rver-listing"


def add_listing_markers(client: Any, bucket: str, keys: list[str]) -> list[str]:
    """Work around s3rver's delimiter listings: a common prefix is listed only when some
    object sits directly below it (with ``small/d00/f.bin`` alone, listing the root with
    ``/`` gives no ``small/``; S3 gives it), so a client that finds names by listing
    cannot reach deeper files. An empty ``MARKER`` object goes into each such directory;
    returns the keys put."""
    parents = {key.rsplit("/", 1)[0] + "/" for key in keys if "/" in key}
    dirs = set()
    for key in keys:
        parts = key.split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) + "/" for i in range(len(parts)))
    put = sorted(d + MARKER for d in dirs - parents)
    for key in put:
        client.put_object(Bucket=bucket, Key=key, Body=b"")
    return put
