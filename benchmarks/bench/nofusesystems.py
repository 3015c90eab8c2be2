"""The systems of ``benchmarks/without_fuse.py``: each one, made fresh, yields a Runner.

Fresh means empty caches: a new mount with an empty cache directory, a new gateway
process, a new client process. Everything that reads the origin does so through the
counting, delaying proxy (``World.proxy``); the tree service lists the bucket straight
from moto (it is shared metadata, listed once before the first pass, and the same for
every CloudFS system).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.nofuserunner import ClientRunner, FileRunner, Runner
from bench.systems import CloudFS, Context, Mount, MountError, free_port, log_tail

S3FS_PYTHON = "/opt/cloudfs-bench-s3fs/bin/python"
GATEWAY_KEY_ID = "benchkey"
GATEWAY_SECRET = "bench-secret-key-0123456789"
GATEWAY_START_S = 60.0
MEMORY_CACHE = "1G"


@dataclass
class World:
    """What the run has set up, shared by every system."""

    ctx: Context  # endpoint = the proxy; s3_env has moto's keys
    tree: str  # HOST:PORT of the tree service
    volume: str  # the volume's name (the gateway's bucket)
    timeout: float  # seconds a pass may take
    s3fs_python: str = S3FS_PYTHON

    @property
    def volume_uri(self) -> str:
        return f"grpc://{self.tree}/{self.volume}"

    def keys(self) -> dict[str, str]:
        env = self.ctx.s3_env
        return {"key_id": env["AWS_ACCESS_KEY_ID"], "secret": env["AWS_SECRET_ACCESS_KEY"]}


class NoFuseSystem:
    name = "?"
    label = "?"
    how = ""  # one line for the report: what reads, how
    new_process = False  # also a third pass: a new client process, the system's caches warm

    def __init__(self, world: World) -> None:
        self.world = world

    def available(self) -> str | None:
        return None

    def fresh(self) -> contextlib.AbstractContextManager[Runner]:
        raise NotImplementedError

    def client(
        self, python: str, spec: dict[str, Any]
    ) -> contextlib.AbstractContextManager[Runner]:
        return _client(self.world, self.name, python, spec)


@contextlib.contextmanager
def _client(world: World, name: str, python: str, spec: dict[str, Any]) -> Iterator[Runner]:
    log = world.ctx.logs / f"{name}-{time.strftime('%H%M%S')}-{os.getpid()}.log"
    runner = ClientRunner(python, spec, world.timeout, world.ctx.s3_env, log)
    try:
        yield runner
    finally:
        runner.close()


class LocalDisk(NoFuseSystem):
    name = "local"
    label = "local disk"
    how = "the same files in a local directory; open/read (the page cache dropped for cold)"

    @contextlib.contextmanager
    def fresh(self) -> Iterator[Runner]:
        yield FileRunner(self.world.ctx.local_root, self.world.timeout, None)


class TreeMount(CloudFS):
    """``cloudfs mount grpc://TREE/VOLUME --read-only`` (dataset mode), the proxy as S3."""

    name = "mount"
    label = "FUSE mount"
    DEFAULTS = {"memory_cache_size": MEMORY_CACHE, "cache_size": "8G"}
    FLAGS = ("--read-only",)

    def __init__(self, ctx: Context, uri: str) -> None:
        super().__init__(ctx)
        self.uri = uri

    def command(
        self, mount: Mount, cache: Path, options: dict[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        argv, env = super().command(mount, cache, options)
        argv[argv.index(f"s3://{self.ctx.bucket}")] = self.uri
        return argv, env


class FuseMount(NoFuseSystem):
    name = "mount"
    label = "FUSE mount"
    how = (
        f"`cloudfs mount grpc://TREE/VOLUME --read-only --memory-cache-size {MEMORY_CACHE}`, "
        "fresh with an empty cache directory; open/read"
    )

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.mount = TreeMount(world.ctx, world.volume_uri)

    def available(self) -> str | None:
        return self.mount.available()

    @contextlib.contextmanager
    def fresh(self) -> Iterator[Runner]:
        with self.mount.mounted() as m:
            yield FileRunner(m.root, self.world.timeout, m.abort)


class Fsspec(NoFuseSystem):
    """``cloudfs://`` in a client process of its own; ``via_mount``: beside a fresh mount of
    the volume, reading through its block cache (storage option ``local_mount``)."""

    name = "fsspec"
    label = "cloudfs:// fsspec"
    how = (
        f"`CloudFileSystem(meta_server=TREE, s3_endpoint=PROXY, memory_cache_size="
        f"{MEMORY_CACHE!r})` in a new process; `open`+1 MiB reads (large), `cat_file` (small)"
    )

    new_process = True

    def __init__(self, world: World, via_mount: bool = False) -> None:
        super().__init__(world)
        self.via_mount = via_mount
        if via_mount:
            self.name = "fsspec-mount"
            self.label = "cloudfs:// fsspec via a local mount"
            self.how = "the same, `local_mount=True`, beside a fresh FUSE mount of the volume"

    def spec(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "meta_server": self.world.tree,
            "s3_endpoint": self.world.ctx.endpoint,
            "memory_cache_size": MEMORY_CACHE,
            "local_mount": self.via_mount,
        }
        return {"client": "cloudfs", "options": options, "root": self.world.volume}

    @contextlib.contextmanager
    def fresh(self) -> Iterator[Runner]:
        with contextlib.ExitStack() as stack:
            if self.via_mount:
                stack.enter_context(TreeMount(self.world.ctx, self.world.volume_uri).mounted())
            yield stack.enter_context(self.client(sys.executable, self.spec()))


class Boto3Origin(NoFuseSystem):
    name = "boto3-origin"
    label = "boto3 straight to the origin"
    how = "boto3 `get_object` through the proxy to moto, no cache: the floor"

    @contextlib.contextmanager
    def fresh(self) -> Iterator[Runner]:
        spec = {"client": "boto3", "endpoint": self.world.ctx.endpoint,
                "bucket": self.world.ctx.bucket, **self.world.keys()}  # fmt: skip
        with self.client(sys.executable, spec) as runner:
            yield runner


class S3fsOrigin(NoFuseSystem):
    name = "s3fs-origin"
    label = "s3fs straight to the origin"
    how = "fsspec's s3fs (own venv) through the proxy to moto; `open`+1 MiB reads, `cat_file`"

    def available(self) -> str | None:
        return s3fs_available(self.world.s3fs_python)

    @contextlib.contextmanager
    def fresh(self) -> Iterator[Runner]:
        spec = {"client": "s3fs", "endpoint": self.world.ctx.endpoint,
                "bucket": self.world.ctx.bucket, **self.world.keys()}  # fmt: skip
        with self.client(self.world.s3fs_python, spec) as runner:
            yield runner


def s3fs_available(python: str) -> str | None:
    if not os.access(python, os.X_OK):
        return (
            f"{python} missing: python3 -m venv /opt/cloudfs-bench-s3fs && "
            "/opt/cloudfs-bench-s3fs/bin/pip install s3fs"
        )
    got = subprocess.run([python, "-c", "import s3fs"], capture_output=True, text=True, timeout=60)
    return None if got.returncode == 0 else f"s3fs does not import: {got.stderr[-200:]}"


def s3fs_version(python: str) -> str:
    got = subprocess.run(
        [python, "-c", "import s3fs, fsspec; print(s3fs.__version__, fsspec.__version__)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    parts = got.stdout.split()
    return f"s3fs {parts[0]}, fsspec {parts[1]}" if len(parts) == 2 else "?"


class Gateway(NoFuseSystem):
    """``cloudfs gateway s3`` over the tree service, fresh per pass group; read with boto3
    (``client="boto3"``) or s3fs (``client="s3fs"``)."""

    name = "gateway"
    label = "S3 gateway, boto3"
    how = (
        f"`cloudfs gateway s3 --block-size 4M --memory-cache-size {MEMORY_CACHE}`, new; boto3 "
        "`get_object` (1 MiB chunks for large)"
    )

    def __init__(self, world: World, client: str = "boto3") -> None:
        super().__init__(world)
        self.client_name = client
        if client == "s3fs":
            self.name = "gateway-s3fs"
            self.label = "S3 gateway, s3fs"
            self.how = "the same gateway read by s3fs (own venv); `open`+1 MiB reads, `cat_file`"

    def cli(self) -> list[str]:
        return [sys.executable, "-m", "cloudfs.cli.main", "gateway", "s3"]

    def env(self) -> dict[str, str]:
        env = dict(self.world.ctx.s3_env)
        env["AWS_ENDPOINT_URL_S3"] = self.world.ctx.endpoint  # the proxy
        path = env.get("PYTHONPATH")
        root = str(self.world.ctx.repo_root)
        env["PYTHONPATH"] = root + (os.pathsep + path if path else "")
        return env

    def help_text(self) -> str:
        got = subprocess.run(
            [*self.cli(), "--help"], env=self.env(), capture_output=True, text=True, timeout=60
        )
        return got.stdout + got.stderr if got.returncode == 0 else ""

    def available(self) -> str | None:
        if "--keys-file" not in self.help_text():
            return "`cloudfs gateway s3 --help` fails or has no --keys-file: not in this checkout"
        if self.client_name == "s3fs":
            return s3fs_available(self.world.s3fs_python)
        return None

    def keys_file(self) -> Path:
        path = self.world.ctx.workdir / "gateway-keys"
        path.write_text(f"{GATEWAY_KEY_ID} {GATEWAY_SECRET}\n")  # "ACCESS SECRET" lines
        path.chmod(0o600)
        return path

    def command(self, port: int) -> list[str]:
        argv = [
            *self.cli(), "--listen", f"127.0.0.1:{port}", "--meta", self.world.tree,
            "--keys-file", str(self.keys_file()), "--block-size", "4M",
            "--memory-cache-size", MEMORY_CACHE, "--volume", self.world.volume,
            "--staging-dir", str(self.world.ctx.workdir / "gateway-staging"),
        ]  # fmt: skip
        if "--s3-endpoint" in self.help_text():
            argv += ["--s3-endpoint", self.world.ctx.endpoint]
        return argv

    @contextlib.contextmanager
    def fresh(self) -> Iterator[Runner]:
        port = free_port()
        self.world.ctx.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.world.ctx.logs / f"gateway-{port}.log"
        argv = self.command(port)
        with open(log_path, "wb") as log:
            log.write(("$ " + " ".join(argv) + "\n").encode())
            log.flush()
            proc = subprocess.Popen(
                argv, env=self.env(), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        try:
            _wait_listening(proc, port, log_path)
            spec = {"client": self.client_name, "endpoint": f"http://127.0.0.1:{port}",
                    "bucket": self.world.volume, "key_id": GATEWAY_KEY_ID,
                    "secret": GATEWAY_SECRET}  # fmt: skip
            python = self.world.s3fs_python if self.client_name == "s3fs" else sys.executable
            with self.client(python, spec) as runner:
                yield runner
        finally:
            _stop(proc)


def _wait_listening(proc: subprocess.Popen[bytes], port: int, log_path: Path) -> None:
    deadline = time.monotonic() + GATEWAY_START_S
    while True:
        if proc.poll() is not None:
            raise MountError(f"gateway exited with {proc.returncode}: {log_tail(log_path)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        if time.monotonic() > deadline:
            raise MountError(f"gateway not listening after {GATEWAY_START_S:.0f} s")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def all_systems(world: World, local_mount: bool, gateway_s3fs: bool) -> list[NoFuseSystem]:
    """Every system, in the order of the report's tables."""
    out: list[NoFuseSystem] = [LocalDisk(world), FuseMount(world), Fsspec(world)]
    if local_mount:
        out.append(Fsspec(world, via_mount=True))
    out.append(Gateway(world))
    if gateway_s3fs:
        out.append(Gateway(world, "s3fs"))
    out += [S3fsOrigin(world), Boto3Origin(world)]
    return out
