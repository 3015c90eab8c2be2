"""A real directory-tree service for tests: ``cloudfs meta serve`` over LMDB on loopback."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.meta.wire.volumes import VolumeSpec
from cloudfs.tls import ClientTLS

_volumes = itertools.count()


@dataclass
class TreeServer:
    address: str
    proc: subprocess.Popen[str]
    token: str | None = None
    command: list[str] = field(default_factory=list)  # with --listen at ``address``
    env: dict[str, str] | None = None
    log_path: Path = Path()  # where its stderr goes (running_tree_server's doc)
    tls: ClientTLS | None = None  # how clients reach a server started with TLS flags
    token_file: str | None = None  # rewrite it to rotate the token

    def new_volume(self, ufs_uri: str, **options: object) -> str:
        """Create a fresh volume over ``ufs_uri``; returns its grpc:// URI."""
        name = f"vol-{os.getpid()}-{next(_volumes)}"
        client = VolumeClient(self.address, token=self.token, tls=self.tls)
        try:
            client.create(VolumeSpec(name=name, ufs_uri=ufs_uri, **options))  # type: ignore[arg-type]
        finally:
            client.close()
        return f"grpc://{self.address}/{name}"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the server (no clean shutdown) and reap it."""
        if self.alive:
            self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s."""
        if self.alive:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self) -> None:
        """Start the server again on the same address (after ``kill`` or ``stop``)."""
        self.stop()
        self.proc = _start(self.command, self.env, self.log_path)
        _await_listening(self.proc, self.log_path)


def _start(cmd: list[str], env: dict[str, str] | None, log_path: Path) -> subprocess.Popen[str]:
    with open(log_path, "a") as log:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env)


def _await_listening(proc: subprocess.Popen[str], log_path: Path) -> str:
    """The address the server prints once it serves ("listening on HOST:PORT"); if it
    exits instead, a ``RuntimeError`` with the end of its log (why it did not start)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        with suppress(OSError):
            proc.kill()
        proc.wait(timeout=15)
        tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
        raise RuntimeError(
            f"tree server did not start (exit {proc.poll()}): {line!r}; its log ends:\n{tail}"
        )
    return line.split()[-1]


@contextmanager
def running_tree_server(
    engine: str | None = None,
    *,
    token: str | None = None,
    env: dict[str, str] | None = None,
    listen: str = "127.0.0.1:0",
    log_path: Path | None = None,
    args: tuple[str, ...] = (),
    tls: ClientTLS | None = None,
) -> Iterator[TreeServer]:
    """``cloudfs meta serve`` on ``listen`` (127.0.0.1, a free port); stopped (SIGTERM) on exit.

    ``log_path``: where the server's log (stderr) goes; when ``None``, a file removed
    at the end (kept long enough to say why a server did not start);
    ``args``: more flags (``--tls-cert``...); ``tls``: what ``new_volume`` dials with.
    ``TreeServer.kill`` and ``restart`` let a test crash it and bring it back
    on the same address.
    """
    work = tempfile.mkdtemp(prefix="cloudfs-tree-")
    cmd = [
        sys.executable, "-m", "cloudfs.cli.main", "meta", "serve",
        "--engine", engine or f"lmdb://{work}/tree", "--listen", listen,
        *args,
    ]  # fmt: skip
    token_file = None
    if token is not None:
        token_file = os.path.join(work, "token")
        with open(token_file, "w") as f:
            f.write(token)
        cmd += ["--token-file", token_file]
    else:
        cmd += ["--no-token"]
    log_path = log_path or Path(work) / "server.log"  # removed with ``work`` at the end
    proc = _start(cmd, env, log_path)
    server: TreeServer | None = None
    try:
        address = _await_listening(proc, log_path)
        fixed = [*cmd]
        fixed[fixed.index("--listen") + 1] = address  # a restart comes back on this port
        server = TreeServer(address, proc, token, fixed, env, log_path, tls, token_file)
        yield server
    finally:
        if server is not None:
            server.stop()
        elif proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
