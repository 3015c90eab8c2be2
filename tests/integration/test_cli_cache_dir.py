"""The default cache directory (no --cache-dir) is per store: same bucket name, other endpoint,
other store."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudfs import mountinfo
from cloudfs.mount import runtime
from testkit.mounts import force_unmount, world_traversable_tmpdir
from testkit.servers import S3Server, running_s3_server

CLI = [sys.executable, "-m", "cloudfs.cli.main"]


def _is_mounted(path: Path) -> bool:
    real = os.path.realpath(path)
    return mountinfo.topmost(mountinfo.read(), real) is not None


@pytest.fixture
def places() -> Iterator[tuple[Path, Path]]:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("mount tests need /dev/fuse and root")
    base = world_traversable_tmpdir("cloudfs-cachedir-")
    mnts = (base / "a", base / "b")
    for p in mnts:
        p.mkdir()
    root = runtime.default_cache_root()
    existed = root.exists()
    before = set(os.listdir(root)) if existed else set()
    try:
        yield mnts
    finally:
        for p in mnts:
            if _is_mounted(p):
                subprocess.run([*CLI, "umount", str(p)], capture_output=True, timeout=90)
            if _is_mounted(p):
                force_unmount(p)
        if root.exists():  # the default cache dirs this test made
            for name in set(os.listdir(root)) - before:
                shutil.rmtree(root / name, ignore_errors=True)
            if not existed and not os.listdir(root):
                root.rmdir()
        if not any(_is_mounted(p) for p in mnts):
            shutil.rmtree(base, ignore_errors=True)


def test_same_bucket_name_on_two_endpoints_gets_two_cache_dirs(
    places: tuple[Path, Path], s3_server: S3Server
) -> None:
    bucket = f"same-name-{os.getpid()}"
    a, b = places
    s3_server.client().create_bucket(Bucket=bucket)
    s3_server.client().put_object(Bucket=bucket, Key="from-a.txt", Body=b"a")
    with running_s3_server() as other:
        other.client().create_bucket(Bucket=bucket)
        other.client().put_object(Bucket=bucket, Key="from-b.txt", Body=b"b")
        first = subprocess.run(
            [*CLI, "mount", f"s3://{bucket}", str(a), "--s3-endpoint", s3_server.endpoint],
            capture_output=True, text=True, timeout=60, env=s3_server.env(),
        )  # fmt: skip
        assert first.returncode == 0, first.stderr
        try:
            assert os.listdir(a) == ["from-a.txt"]
            second = subprocess.run(
                [*CLI, "mount", f"s3://{bucket}", str(b), "--s3-endpoint", other.endpoint],
                capture_output=True, text=True, timeout=60, env=other.env(),
            )  # fmt: skip
            assert second.returncode == 0, second.stderr
            assert os.listdir(b) == ["from-b.txt"]
        finally:
            for p in (b, a):
                if _is_mounted(p):
                    subprocess.run([*CLI, "umount", str(p)], capture_output=True, timeout=90)
