"""The FUSE client of a staged volume: ``cloudfs mount`` run as its own process.

``cloudfs mount`` goes to the background once the kernel mount exists and
starts a new session, so the mount process is no child of the driver: a
driver that exits or restarts leaves it serving. In Kubernetes a container's
restart ends every process in it, so there the ``cloudfs`` commands run in the
node pod's mounter container (``mounter.py``), reached through a ``Runner``;
the driver's own container can then restart and the mounts stay. Secrets
reach the mount process through its environment (S3/HDFS credentials) and
0600 files (tokens, TLS material), never its argv.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cloudfs.mount import runtime
from cloudfs_csi.errors import Internal
from cloudfs_csi.redact import scrub
from cloudfs_csi.tls import TlsFiles

START_TIMEOUT = 120.0
STOP_TIMEOUT = 120.0


@dataclass(frozen=True)
class FuseSpec:
    """How to start the FUSE process of one staged volume."""

    uri: str
    mount_point: str
    cache_dir: str
    options: tuple[str, ...] = ()  # `cloudfs mount -o` items
    read_only: bool = False
    token_file: str | None = None
    cache_group: tuple[str, ...] = ()  # --cache-group NAME or --cache-peers A,B
    cache_token_file: str | None = None
    tls: TlsFiles = field(default_factory=TlsFiles)  # --tls-ca, --tls-cert, --tls-key
    env: dict[str, str] = field(default_factory=dict)  # secret: never logged

    def secret_values(self) -> dict[str, str]:
        """Every secret this mount is given (environment, tokens, TLS key), to mask in
        what its process says; a file the driver cannot read is left out."""
        out = dict(self.env)
        for path in (self.token_file, self.cache_token_file, self.tls.key):
            if path:
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    out[path] = Path(path).read_text(encoding="utf-8").strip()
        return out

    @property
    def log_file(self) -> str:
        return os.path.join(self.cache_dir, "mount.log")


@dataclass(frozen=True)
class RunResult:
    returncode: int
    stderr: str


class Runner(Protocol):
    """Runs one ``cloudfs`` CLI command (``mount ...`` or ``umount ...``)."""

    def run(self, args: list[str], env: dict[str, str], timeout: float) -> RunResult:
        """Raises ``subprocess.TimeoutExpired`` or ``OSError`` when it cannot run it."""
        ...


DEFAULT_COMMAND = (sys.executable, "-m", "cloudfs.cli.main")


class LocalRunner:
    """Runs the command here, as a child of this process."""

    def __init__(self, command: list[str] | None = None) -> None:
        self._command = list(command or DEFAULT_COMMAND)

    def run(self, args: list[str], env: dict[str, str], timeout: float) -> RunResult:
        result = subprocess.run(
            [*self._command, *args],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return RunResult(result.returncode, result.stderr)


class FuseLauncher:
    """Starts and stops ``cloudfs mount`` processes."""

    def __init__(self, runner: Runner | None = None) -> None:
        self._runner: Runner = runner or LocalRunner()

    def start(self, spec: FuseSpec) -> None:
        """Mount ``spec.uri`` at ``spec.mount_point``; returns once the mount serves."""
        os.makedirs(spec.cache_dir, mode=0o700, exist_ok=True)
        cmd = [
            "mount", spec.uri, spec.mount_point,
            "--cache-dir", spec.cache_dir, "--log-file", spec.log_file, "--allow-other",
        ]  # fmt: skip
        if spec.read_only:
            cmd.append("--read-only")
        if spec.token_file:
            cmd += ["--token-file", spec.token_file]
        cmd += spec.cache_group
        if spec.cache_token_file:
            cmd += ["--cache-token-file", spec.cache_token_file]
        cmd += spec.tls.args()
        if spec.options:
            cmd += ["-o", ",".join(spec.options)]
        try:
            result = self._runner.run(cmd, spec.env, START_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Internal(f"cloudfs mount at {spec.mount_point} did not start in time") from None
        except OSError as exc:
            raise Internal(f"cannot run cloudfs mount: {exc}") from None
        if result.returncode != 0:
            reason = scrub(result.stderr.strip(), spec.secret_values()).splitlines()
            raise Internal(
                f"cloudfs mount at {spec.mount_point} failed: {reason[-1] if reason else '?'}"
            )

    def stop(self, mount_point: str) -> None:
        """Unmount, after the mount uploads what it owes (write-back drains first)."""
        result: RunResult | None
        try:
            result = self._runner.run(["umount", "--quiet", mount_point], {}, STOP_TIMEOUT)
        except (subprocess.TimeoutExpired, OSError):
            result = None
        if result is None or result.returncode != 0:
            self.detach(mount_point)

    def detach(self, mount_point: str) -> None:
        """Lazy unmount of a mount whose process is gone or wedged."""
        tool = shutil.which("fusermount3") or shutil.which("fusermount")
        cmd = [tool, "-u", "-z", mount_point] if tool else ["umount", "-l", mount_point]
        subprocess.run(cmd, capture_output=True, timeout=STOP_TIMEOUT)

    @staticmethod
    def pid(mount_point: str) -> int | None:
        """The mount process serving ``mount_point`` (from its pid file), if known."""
        return runtime.read_pid(os.path.realpath(mount_point))
