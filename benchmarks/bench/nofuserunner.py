"""How a pass is run: through files (local disk, a FUSE mount) or through one client
process (fsspec, boto3, s3fs) that keeps its in-process caches from pass to pass."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from bench.workloads import PassFailed, run_pass

BENCH_DIR = Path(__file__).resolve().parent.parent  # benchmarks/: `bench` importable


class Runner:
    """Runs passes over one fresh system (fresh caches at the first pass)."""

    def read(self, keys: list[str], readers: int, stream: bool) -> dict[str, Any]:
        raise NotImplementedError

    def respawn(self) -> None:
        """Go on in a new client process (its own caches empty, the system's kept)."""
        raise NotImplementedError


class FileRunner(Runner):
    """Every pass a child process reading files under ``root`` (``bench.workloads``
    ``readcrc``: 1 MiB ``readinto`` calls on unbuffered files, crc32 of each)."""

    def __init__(self, root: Path, timeout: float, abort: Callable[[], None] | None) -> None:
        self.root = root
        self.timeout = timeout
        self.abort = abort

    def read(self, keys: list[str], readers: int, stream: bool) -> dict[str, Any]:
        spec = {
            "kind": "readcrc",
            "paths": [str(self.root / k) for k in keys],
            "readers": readers,
        }
        return run_pass(spec, self.timeout, self.abort)


class ClientRunner(Runner):
    """One ``bench.nofuseload`` child for all passes (see there for the line protocol).

    Started, and its client built, before the first pass; past ``timeout`` seconds
    for a line the child's whole session is killed and the pass fails."""

    def __init__(
        self, python: str, spec: dict[str, Any], timeout: float, env: dict[str, str], log: Path
    ) -> None:
        self.timeout = timeout
        self.python = python
        self.spec = spec
        self.env = dict(env)
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(BENCH_DIR), env.get("PYTHONPATH", "")) if p
        )
        self.log_path = log
        log.parent.mkdir(parents=True, exist_ok=True)
        self._start()

    def _start(self) -> None:
        self._log = open(self.log_path, "ab")  # noqa: SIM115  # closed in close()
        self.proc = subprocess.Popen(
            [self.python, "-m", "bench.nofuseload"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=self.env,
            start_new_session=True,
        )
        self._send(self.spec)
        if not self._receive().get("ready"):
            raise PassFailed("client did not say it was ready")

    def _send(self, obj: dict[str, Any]) -> None:
        stdin: IO[bytes] | None = self.proc.stdin
        assert stdin is not None
        try:
            stdin.write((json.dumps(obj) + "\n").encode())
            stdin.flush()
        except BrokenPipeError:
            raise PassFailed(f"client exited: {self._tail()}") from None

    def _receive(self) -> dict[str, Any]:
        stdout: IO[bytes] | None = self.proc.stdout
        assert stdout is not None
        timer = threading.Timer(self.timeout, self._kill)
        timer.start()
        try:
            line = stdout.readline()
        finally:
            timer.cancel()
        if not line:
            self.proc.wait(timeout=30)
            raise PassFailed(
                f"client exited ({self.proc.returncode}) or ran past {self.timeout:.0f} s: "
                f"{self._tail()}"
            )
        out: dict[str, Any] = json.loads(line)
        return out

    def _tail(self) -> str:
        self._log.flush()
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(lines[-3:])

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def read(self, keys: list[str], readers: int, stream: bool) -> dict[str, Any]:
        self._send({"keys": keys, "readers": readers, "stream": stream})
        return self._receive()

    def respawn(self) -> None:
        self.close()
        self._start()

    def close(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._kill()
            self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
