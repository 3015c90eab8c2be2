"""A real directory-tree service for tests: ``cloudfs meta serve`` over LMDB on loopback."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from cloudfs.meta.remote import VolumeClient
from cloudfs.meta.service.volumes import VolumeSpec

_volumes = itertools.count()


@dataclass
class TreeServer:
    address: str
    proc: subprocess.Popen[str]
    token: str | None = None

    def new_volume(self, ufs_uri: str, **options: object) -> str:
        """Create a fresh volume over ``ufs_uri``; returns its grpc:// URI."""
        name = f"vol-{os.getpid()}-{next(_volumes)}"
        client = VolumeClient(self.address, token=self.token)
        try:
            client.create(VolumeSpec(name=name, ufs_uri=ufs_uri, **options))  # type: ignore[arg-type]
        finally:
            client.close()
        return f"grpc://{self.address}/{name}"


@contextmanager
def running_tree_server(
    engine: str | None = None, *, token: str | None = None, env: dict[str, str] | None = None
) -> Iterator[TreeServer]:
    """``cloudfs meta serve`` on 127.0.0.1 (a free port); stopped (SIGTERM) on exit."""
    work = tempfile.mkdtemp(prefix="cloudfs-tree-")
    cmd = [
        sys.executable, "-m", "cloudfs.cli.main", "meta", "serve",
        "--engine", engine or f"lmdb://{work}/tree", "--listen", "127.0.0.1:0",
    ]  # fmt: skip
    if token is not None:
        token_file = os.path.join(work, "token")
        with open(token_file, "w") as f:
            f.write(token)
        cmd += ["--token-file", token_file]
    else:
        cmd += ["--no-token"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "listening on HOST:PORT" once it serves
        if not line.startswith("listening on "):
            raise RuntimeError(f"tree server did not start (exit {proc.poll()}): {line!r}")
        yield TreeServer(line.split()[-1], proc, token)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
