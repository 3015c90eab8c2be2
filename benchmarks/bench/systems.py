"""Mount and unmount each system under test.

Every mount gets a fresh mountpoint and an empty cache directory, runs in the foreground
as a child process in its own session, is waited for (bounded) until the kernel shows it
mounted, and is always unmounted on the way out: the system's own unmount first, then
``fusermount3 -u -z`` and SIGKILL when that does not finish in time.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MOUNT_TIMEOUT_S = 90.0
UNMOUNT_TIMEOUT_S = 90.0


class MountError(RuntimeError):
    """A system could not be mounted (the message carries the tail of its log)."""


@dataclass
class Context:
    """What every system needs to know about the run."""

    workdir: Path  # mountpoints, caches and logs live under here
    endpoint: str  # the S3 endpoint (moto on 127.0.0.1)
    s3_env: dict[str, str]  # environment with the endpoint's credentials
    bucket: str
    local_root: Path  # the local-disk copy of the data set
    repo_root: Path  # for running the CloudFS in this checkout

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"


@dataclass
class Mount:
    """One live mount (or the local directory) while a ``mounted()`` block runs."""

    system: str
    root: Path
    proc: subprocess.Popen[bytes] | None = None
    metrics_port: int | None = None
    peak_mib: float | None = None  # the FUSE process's VmHWM, read just before unmounting
    notes: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # what the mount says of itself

    def abort(self) -> None:
        """Tear the mount down now (a pass ran past its time): lazy unmount, kill the process."""
        if os.path.ismount(self.root):
            subprocess.run(["fusermount3", "-u", "-z", str(self.root)], check=False, timeout=30)
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.notes.append("aborted")


class System:
    """Base: a system that serves the data set at some root directory."""

    name = "?"
    label = "?"
    is_fuse = True

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def available(self) -> str | None:
        """None when the system can run here, else why not."""
        return None

    def version(self) -> str:
        return ""

    def mounted(self, **options: str) -> contextlib.AbstractContextManager[Mount]:
        raise NotImplementedError


class LocalDisk(System):
    """The data set in a plain directory on the local disk: the limit to compare against."""

    name = "local"
    label = "local disk"
    is_fuse = False

    @contextlib.contextmanager
    def mounted(self, **options: str) -> Iterator[Mount]:
        yield Mount(self.name, self.ctx.local_root)


class FuseSystem(System):
    """A FUSE filesystem started in the foreground as a child process."""

    def command(
        self, mount: Mount, cache: Path, options: dict[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def unmount_command(self, mnt: Path) -> list[str]:
        return ["fusermount3", "-u", str(mnt)]

    def ready(self, mount: Mount) -> bool:
        return True

    def prepare(self, mount: Mount, options: dict[str, str]) -> None:
        """Called before the command is built (e.g. to pick a metrics port)."""

    def verify(self, mount: Mount) -> None:
        """Called once the mount is live; raise MountError when it is not what was asked for."""

    @contextlib.contextmanager
    def mounted(self, **options: str) -> Iterator[Mount]:
        base = self.ctx.workdir / "mounts"
        base.mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=base))
        mnt, cache = run_dir / "mnt", run_dir / "cache"
        mnt.mkdir()
        cache.mkdir()
        self.ctx.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.ctx.logs / f"{run_dir.name}.log"
        mount = Mount(self.name, mnt)
        self.prepare(mount, options)
        argv, env = self.command(mount, cache, options)
        with open(log_path, "wb") as log:
            log.write(("$ " + " ".join(argv) + "\n").encode())
            log.flush()
            mount.proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_live(mount, log_path)
            self.verify(mount)
            yield mount
        finally:
            if mount.proc.poll() is None:
                mount.peak_mib = peak_memory_mib(mount.proc.pid)
            self._unmount(mount)
            shutil.rmtree(run_dir, ignore_errors=True)

    def _wait_live(self, mount: Mount, log_path: Path) -> None:
        assert mount.proc is not None
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not (os.path.ismount(mount.root) and self.ready(mount)):
            if mount.proc.poll() is not None:
                raise MountError(
                    f"{self.name} exited with {mount.proc.returncode} before mounting: "
                    f"{log_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                raise MountError(
                    f"{self.name} not mounted after {MOUNT_TIMEOUT_S:.0f} s: {log_tail(log_path)}"
                )
            time.sleep(0.1)

    def _unmount(self, mount: Mount) -> None:
        proc = mount.proc
        assert proc is not None
        unmounter = None
        if os.path.ismount(mount.root):
            # Run the unmount command while reaping our child: `cloudfs umount` waits for the
            # mount process to exit, and an unreaped child would look alive to it.
            unmounter = subprocess.Popen(
                self.unmount_command(mount.root),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        try:
            proc.wait(timeout=UNMOUNT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            mount.notes.append("did not exit after unmount")
        if unmounter is not None:
            try:
                _, err = unmounter.communicate(timeout=UNMOUNT_TIMEOUT_S)
                if unmounter.returncode != 0:
                    mount.notes.append(f"unmount said: {err.decode(errors='replace').strip()}")
            except subprocess.TimeoutExpired:
                unmounter.kill()
                unmounter.wait()
                mount.notes.append("unmount command hung")
        if os.path.ismount(mount.root):
            mount.notes.append("lazy unmount needed")
            subprocess.run(["fusermount3", "-u", "-z", str(mount.root)], check=False, timeout=30)
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


class CloudFS(FuseSystem):
    """A read-write CloudFS mount (``cloudfs mount`` with DEFAULTS)."""

    name = "cloudfs"
    label = "CloudFS"
    DEFAULTS = {"memory_cache_size": "1G", "cache_size": "20G"}
    FLAGS: tuple[str, ...] = ()  # options without a value, added after DEFAULTS

    def cli(self) -> list[str]:
        return [sys.executable, "-m", "cloudfs.cli.main"]

    def env(self) -> dict[str, str]:
        env = dict(self.ctx.s3_env)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(self.ctx.repo_root) + (os.pathsep + path if path else "")
        return env

    def help_text(self) -> str:
        result = subprocess.run(
            [*self.cli(), "mount", "--help"],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return result.stdout + result.stderr

    def available(self) -> str | None:
        text = self.help_text()
        return None if "--cache-size" in text else f"`cloudfs mount --help` failed: {text[-300:]}"

    def version(self) -> str:
        result = subprocess.run(
            [*self.cli(), "--version"], env=self.env(), capture_output=True, text=True, timeout=60
        )
        return result.stdout.strip()

    def prepare(self, mount: Mount, options: dict[str, str]) -> None:
        mount.metrics_port = free_port()

    def command(
        self, mount: Mount, cache: Path, options: dict[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        opts = {**self.DEFAULTS, **options}
        extra: list[str] = []
        for key, value in opts.items():
            extra += [f"--{key.replace('_', '-')}", value]
        argv = [
            *self.cli(), "mount", f"s3://{self.ctx.bucket}", str(mount.root),
            "--s3-endpoint", self.ctx.endpoint, "--cache-dir", str(cache), *extra, *self.FLAGS,
            "--metrics", f"127.0.0.1:{mount.metrics_port}", "-f",
        ]  # fmt: skip
        return argv, self.env()

    def ready(self, mount: Mount) -> bool:
        url = f"http://127.0.0.1:{mount.metrics_port}/metrics"
        try:
            urllib.request.urlopen(url, timeout=2).read()
        except OSError:
            return False
        return True

    def unmount_command(self, mnt: Path) -> list[str]:
        return [*self.cli(), "umount", str(mnt), "--timeout", "60"]

    def stats(self, mount: Mount) -> dict[str, Any]:
        """``cloudfs stats MOUNTPOINT --json`` (MountError when it fails)."""
        result = subprocess.run(
            [*self.cli(), "stats", str(mount.root), "--json"],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        try:
            out: dict[str, Any] = json.loads(result.stdout)
        except ValueError:
            raise MountError(
                f"{self.name}: `cloudfs stats --json` failed ({result.returncode}): "
                f"{(result.stderr or result.stdout)[-300:]}"
            ) from None
        return out

    def verify(self, mount: Mount) -> None:
        """Record what the mount says of itself (how opens go) for the report."""
        try:
            mount.facts = dict(self.stats(mount).get("mount") or {})
        except (MountError, OSError, subprocess.SubprocessError) as e:
            mount.facts = {"error": str(e)}


class CloudFSReadOnly(CloudFS):
    """The same mount with ``--read-only``: dataset mode (``--dataset-mode auto``), where the
    kernel serves warm files without open/flush/release reaching the mount."""

    name = "cloudfs-ro"
    label = "CloudFS dataset mode"
    FLAGS = ("--read-only",)
    ON = "by the kernel"  # how `cloudfs stats --json` says opens skip the mount
    OFF = "DATASET MODE IS OFF"  # starts the error of a pass whose mount was not in it

    def verify(self, mount: Mount) -> None:
        mount.facts = dict(self.stats(mount).get("mount") or {})
        opens = str(mount.facts.get("opens", "?"))
        if not opens.startswith(self.ON):
            raise MountError(
                f"{self.OFF} on this --read-only mount: `cloudfs stats --json` says "
                f"opens go {opens!r} (expected {self.ON!r}...); no dataset-mode figure measured"
            )


class S3fs(FuseSystem):
    name = "s3fs"
    label = "s3fs-fuse"

    def available(self) -> str | None:
        return None if shutil.which("s3fs") else "s3fs not installed (apt-get install s3fs)"

    def version(self) -> str:
        out = subprocess.run(["s3fs", "--version"], capture_output=True, text=True, check=False)
        return out.stdout.splitlines()[0] if out.stdout else "?"

    def command(
        self, mount: Mount, cache: Path, options: dict[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        passwd = self.ctx.workdir / "s3fs.passwd"
        env = self.ctx.s3_env
        passwd.write_text(f"{env['AWS_ACCESS_KEY_ID']}:{env['AWS_SECRET_ACCESS_KEY']}\n")
        passwd.chmod(0o600)
        argv = [
            "s3fs", self.ctx.bucket, str(mount.root), "-f",
            "-o", f"url={self.ctx.endpoint}", "-o", "use_path_request_style",
            "-o", f"passwd_file={passwd}", "-o", f"use_cache={cache}",
        ]  # fmt: skip
        return argv, dict(env)


class Rclone(FuseSystem):
    name = "rclone"
    label = "rclone"

    def available(self) -> str | None:
        return None if shutil.which("rclone") else "rclone not installed (apt-get install rclone)"

    def version(self) -> str:
        out = subprocess.run(["rclone", "version"], capture_output=True, text=True, check=False)
        return out.stdout.splitlines()[0] if out.stdout else "?"

    def command(
        self, mount: Mount, cache: Path, options: dict[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        env = dict(self.ctx.s3_env)
        env.pop("AWS_CA_BUNDLE", None)  # rclone refuses to start with it set
        conf = self.ctx.workdir / "rclone.conf"
        conf.write_text(
            "[bench]\n"
            "type = s3\n"
            "provider = Other\n"
            f"endpoint = {self.ctx.endpoint}\n"
            "force_path_style = true\n"
            f"access_key_id = {env['AWS_ACCESS_KEY_ID']}\n"
            f"secret_access_key = {env['AWS_SECRET_ACCESS_KEY']}\n"
            f"region = {env.get('AWS_DEFAULT_REGION', 'us-east-1')}\n"
        )
        argv = [
            "rclone", "mount", f"bench:{self.ctx.bucket}", str(mount.root), "--config", str(conf),
            "--vfs-cache-mode", "full", "--cache-dir", str(cache),
        ]  # fmt: skip
        return argv, env


SYSTEMS: dict[str, type[System]] = {
    cls.name: cls for cls in (CloudFS, CloudFSReadOnly, S3fs, Rclone, LocalDisk)
}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:])


def peak_memory_mib(pid: int) -> float | None:
    """VmHWM of ``pid`` and all its descendants, summed, in MiB (None if unreadable)."""
    total_kib = 0
    found = False
    for p in [pid, *descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total_kib += int(line.split()[1])
                    found = True
        except (OSError, ValueError):
            continue
    return total_kib / 1024 if found else None


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def unmount_leftovers(workdir: Path) -> list[str]:
    """Lazily unmount anything still mounted under ``workdir`` (the last line of defence)."""
    left: list[str] = []
    base = os.path.realpath(workdir)
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    for point in points:
        if point.startswith(base + os.sep):
            subprocess.run(["fusermount3", "-u", "-z", point], check=False, timeout=30)
            left.append(point)
    return left
