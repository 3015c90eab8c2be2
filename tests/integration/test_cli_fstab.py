"""``mount.fuse.cloudfs SOURCE MOUNTPOINT -o OPTIONS``: what mount(8) runs for fstab entries."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.mounts import force_unmount, world_traversable_tmpdir
from testkit.servers import S3Server

HELPERS = {
    "console-script": [shutil.which("mount.fuse.cloudfs") or "mount.fuse.cloudfs"],
    "python-m": [sys.executable, "-m", "cloudfs.cli.fstab"],
}


def _mountinfo(path: Path) -> str | None:
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if line.split()[4] == real:
                return line
    return None


@pytest.fixture
def place() -> Iterator[Path]:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("mount tests need /dev/fuse and root")
    base = world_traversable_tmpdir("cloudfs-fstab-")
    (base / "mnt").mkdir()
    (base / "data").mkdir()
    try:
        yield base
    finally:
        if _mountinfo(base / "mnt"):
            subprocess.run(
                [sys.executable, "-m", "cloudfs.cli.main", "umount", str(base / "mnt")],
                capture_output=True,
                timeout=90,
            )
        if _mountinfo(base / "mnt"):
            force_unmount(base / "mnt")
        if not _mountinfo(base / "mnt"):
            shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_fstab_helper_mounts_with_options(place: Path, helper: str) -> None:
    data, mnt, cache = place / "data", place / "mnt", place / "cache"
    (data / "a.txt").write_bytes(b"aaa")
    options = (
        f"rw,_netdev,nofail,defaults,noatime,x-systemd.automount,allow_other,meta_ttl=1,"
        f"cache_dir={cache},uid=1234,file_mode=0600,log_file={place / 'log'}"
    )
    result = subprocess.run(
        [*HELPERS[helper], f"file://{data}", str(mnt), "-o", options],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    info = _mountinfo(mnt)
    assert info is not None
    assert "fuse.cloudfs" in info
    assert "allow_other" in info
    assert os.listdir(mnt) == ["a.txt"]
    st = os.stat(mnt / "a.txt")
    assert st.st_uid == 1234
    assert stat.S_IMODE(st.st_mode) == 0o600
    # cache_dir= took effect: the tree and the lock live there
    assert (cache / "lock").exists()
    assert (cache / "meta").exists()
    # meta_ttl=1 took effect: a change behind the mount's back shows within ~1.5 s
    (data / "b.txt").write_bytes(b"bb")
    time.sleep(1.5)
    assert sorted(os.listdir(mnt)) == ["a.txt", "b.txt"]


def test_fstab_helper_with_s3_options(place: Path, s3_server: S3Server) -> None:
    s3_server.client().create_bucket(Bucket="fstab-bucket")
    s3_server.client().put_object(Bucket="fstab-bucket", Key="p/x.txt", Body=b"xx")
    env = s3_server.env()
    env.pop("AWS_ENDPOINT_URL_S3")  # the endpoint must come from -o s3_endpoint=
    mnt = place / "mnt"
    result = subprocess.run(
        [
            *HELPERS["console-script"], "s3://fstab-bucket/p", str(mnt),
            "-o", f"_netdev,ro,s3_endpoint={s3_server.endpoint},s3_region=us-east-1",
            "-o", f"cache_dir={place / 'cache'},block_size=1M,cache_size=100M",
        ],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert os.listdir(mnt) == ["x.txt"]
    assert (mnt / "x.txt").read_bytes() == b"xx"
    with pytest.raises(OSError) as e:
        (mnt / "y.txt").write_bytes(b"no")
    assert e.value.errno == 30  # EROFS


def test_fstab_helper_rejects_unknown_option(place: Path) -> None:
    result = subprocess.run(
        [*HELPERS["console-script"], f"file://{place / 'data'}", str(place / "mnt"),
         "-o", "rw,frobnicate=3"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cloudfs:"), result.stderr
    assert "frobnicate" in lines[0]
    assert _mountinfo(place / "mnt") is None


def test_fstab_helper_usage(place: Path) -> None:
    result = subprocess.run(HELPERS["console-script"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "usage" in result.stderr
