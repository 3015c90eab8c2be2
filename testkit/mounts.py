"""Real CloudFS mounts for tests: started through the CLI, always unmounted."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from cloudfs import mountinfo
from testkit.servers import S3Server

# Why a test of the mount's own listing options skips the "tree" backend.
VOLUME_PROPERTY = (
    "the listing TTL, default modes and prefix are properties of a tree-service volume "
    "(cloudfs volume create), not of the mount"
)


@dataclass
class Backing:
    """Where a mount's data lives: a local directory or a bucket on the test S3 server."""

    uri: str
    local_dir: Path | None = None
    s3: S3Server | None = None
    bucket: str | None = None
    peer_uri: str | None = None  # the same volume through a second tree server

    def peer(self) -> Backing:
        """This volume as the second tree server serves it."""
        assert self.peer_uri is not None
        return Backing(self.peer_uri, self.local_dir, self.s3, self.bucket)

    def env(self) -> dict[str, str]:
        return self.s3.env() if self.s3 else dict(os.environ)

    @property
    def is_tree(self) -> bool:
        """A volume of the tree service (a grpc:// URI over ``local_dir``)."""
        return self.uri.startswith("grpc://")

    @functools.cached_property
    def client(self):  # type: ignore[no-untyped-def]
        """One boto3 client (thread-safe) for this bucket."""
        assert self.s3 is not None
        return self.s3.client()

    def read_object(self, key: str) -> bytes:
        if self.local_dir is not None:
            return (self.local_dir / key).read_bytes()
        assert self.s3 is not None
        body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        return bytes(body.read())

    def write_object(self, key: str, data: bytes) -> None:
        if self.local_dir is not None:
            path = self.local_dir / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            return
        assert self.s3 is not None
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def delete_object(self, key: str) -> None:
        if self.local_dir is not None:
            (self.local_dir / key).unlink()
            return
        assert self.s3 is not None
        self.client.delete_object(Bucket=self.bucket, Key=key)

    def keys(self) -> set[str]:
        """Every file's key (directory markers left out)."""
        if self.local_dir is not None:
            root = self.local_dir
            return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
        assert self.s3 is not None
        keys: set[str] = set()
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket):
            keys.update(o["Key"] for o in page.get("Contents", []) if not o["Key"].endswith("/"))
        return keys


@dataclass
class MntBacking:
    """The objects under one directory of a mount (``prefix``, relative to the root)."""

    backing: Backing
    prefix: str

    def put_many(self, objects: dict[str, bytes], threads: int = 8) -> None:
        """Write many objects straight into the UFS, in parallel."""
        items = [(f"{self.prefix}/{key}", data) for key, data in objects.items()]
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda kv: self.backing.write_object(*kv), items))

    @staticmethod
    def wait_until_visible(path: Path, timeout: float = 30.0) -> None:
        """Wait for a change made behind the mount's back to show (after the meta TTL)."""
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} did not appear within {timeout} s")
            time.sleep(0.2)


@dataclass
class Mount:
    root: Path
    backing: Backing
    cache_dir: Path
    options: list[str] = field(default_factory=list)

    def start(self) -> None:
        cmd = [
            sys.executable, "-m", "cloudfs.cli.main", "mount", self.backing.uri, str(self.root),
            "--cache-dir", str(self.cache_dir), "--allow-other",
            "--log-file", str(self.cache_dir.parent / f"{self.cache_dir.name}.log"),
            *self.options,
        ]  # fmt: skip
        result = subprocess.run(
            cmd, env=self.backing.env(), capture_output=True, text=True, timeout=60
        )
        if result.returncode != 0:
            raise RuntimeError(f"mount failed ({result.returncode}): {result.stderr.strip()}")

    def stop(self) -> None:
        cmd = [sys.executable, "-m", "cloudfs.cli.main", "umount", str(self.root)]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
        if result.returncode != 0:
            force_unmount(self.root)

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        path = self.cache_dir.parent / f"{self.cache_dir.name}.log"
        return path.read_text() if path.exists() else ""


def force_unmount(path: Path) -> None:
    """Last resort for a fixture: lazy unmount, then give the process time to exit."""
    with suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["fusermount3", "-u", "-z", str(path)], capture_output=True, timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _mounted(path):
        time.sleep(0.05)


def _mounted(path: Path) -> bool:
    real = os.path.realpath(path)
    return mountinfo.topmost(mountinfo.read(), real) is not None


def world_traversable_tmpdir(prefix: str) -> Path:
    """A fresh directory that other users can reach (permission tests run as uid 1000)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


@contextmanager
def mounted(backing: Backing, options: list[str] | None = None) -> Iterator[Mount]:
    base = world_traversable_tmpdir("cloudfs-test-")
    root = base / "mnt"
    root.mkdir()
    root.chmod(0o755)
    mount = Mount(root, backing, base / "cache", list(options or []))
    try:
        mount.start()
        yield mount
    finally:
        try:
            mount.stop()
        finally:
            if _mounted(root):
                force_unmount(root)
            if not _mounted(root):
                shutil.rmtree(base, ignore_errors=True)
