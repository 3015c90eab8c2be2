"""Real cache workers for tests: ``cloudfs cache serve`` processes on loopback."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CacheWorker:
    address: str  # HOST:PORT, as mounts name it in --cache-peers
    proc: subprocess.Popen[str]
    command: list[str]  # with --listen at ``address``: a restart comes back there
    env: dict[str, str]
    log_path: Path
    cache_dir: Path
    token_file: Path | None = None  # rewrite it to rotate the token

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL (a crashed worker: no clean shutdown) and reap it."""
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
        """Stop it and start it again on the same address and cache directory."""
        self.stop()
        self.proc = _start(self.command, self.env, self.log_path)
        _await_listening(self.proc, self.log_path)

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""


def _start(cmd: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[str]:
    with open(log_path, "a") as log:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env)


def _await_listening(proc: subprocess.Popen[str], log_path: Path) -> str:
    """The address the worker prints once it serves ("listening on HOST:PORT")."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        with suppress(OSError):
            proc.kill()
        proc.wait(timeout=15)
        raise RuntimeError(
            f"cache worker did not start (exit {proc.poll()}): {line!r}\n{log_path.read_text()}"
        )
    return line.split()[-1]


@contextmanager
def running_cache_worker(
    env: dict[str, str],
    *,
    token: str | None = None,
    options: list[str] | None = None,
) -> Iterator[CacheWorker]:
    """``cloudfs cache serve`` on 127.0.0.1 (a free port), with a fresh cache directory;
    stopped (SIGTERM) and its directory removed on exit. ``env``: S3 settings, as a
    mount's (``S3Server.env()``); ``options``: more flags (``--s3-endpoint``, sizes)."""
    work = Path(tempfile.mkdtemp(prefix="cloudfs-worker-"))
    cache_dir = work / "cache"
    cmd = [
        sys.executable, "-m", "cloudfs.cli.main", "cache", "serve",
        "--listen", "127.0.0.1:0", "--cache-dir", str(cache_dir), *(options or []),
    ]  # fmt: skip
    token_file = None
    if token is None:
        cmd.append("--no-token")
    else:
        token_file = work / "token"
        token_file.write_text(token)
        cmd += ["--token-file", str(token_file)]
    log_path = work / "worker.log"
    proc = _start(cmd, env, log_path)
    worker: CacheWorker | None = None
    try:
        address = _await_listening(proc, log_path)
        fixed = [*cmd]
        fixed[fixed.index("--listen") + 1] = address
        worker = CacheWorker(address, proc, fixed, env, log_path, cache_dir, token_file)
        yield worker
    finally:
        if worker is not None:
            worker.stop()
        elif proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


@contextmanager
def running_cache_workers(
    count: int, env: dict[str, str], *, options: list[str] | None = None
) -> Iterator[list[CacheWorker]]:
    """``count`` workers (no token), all stopped on exit."""
    with ExitStack() as stack:
        yield [
            stack.enter_context(running_cache_worker(env, options=options)) for _ in range(count)
        ]
