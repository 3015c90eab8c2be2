"""``cloudfs mount``/``umount`` as a user runs them: one clear line and an exit code on failure.

Every failure must print exactly one line on stderr, starting with "cloudfs:",
and no traceback; success returns only once the mount is usable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudfs import mountinfo
from cloudfs.mount import runtime
from testkit.mounts import Backing, force_unmount, mounted, world_traversable_tmpdir
from testkit.servers import S3Server, free_port, running_s3_server

CLI = [sys.executable, "-m", "cloudfs.cli.main"]


def _require_fuse() -> None:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("mount tests need /dev/fuse and root")


def _is_mounted(path: Path) -> bool:
    real = os.path.realpath(path)
    return mountinfo.topmost(mountinfo.read(), real) is not None


@pytest.fixture
def place() -> Iterator[Path]:
    """A scratch dir with ``mnt/`` (a mountpoint) and ``cache/``; unmounted on exit."""
    _require_fuse()
    base = world_traversable_tmpdir("cloudfs-cli-")
    (base / "mnt").mkdir()
    (base / "data").mkdir()
    try:
        yield base
    finally:
        if _is_mounted(base / "mnt"):
            subprocess.run([*CLI, "umount", str(base / "mnt")], capture_output=True, timeout=90)
        if _is_mounted(base / "mnt"):
            force_unmount(base / "mnt")
        if not _is_mounted(base / "mnt"):
            shutil.rmtree(base, ignore_errors=True)


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 90):  # type: ignore[no-untyped-def]
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env or dict(os.environ)
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("cloudfs:"), lines[0]
    for needle in needles:
        assert needle.lower() in lines[0].lower(), (needle, lines[0])
    return lines[0]


def mount_args(place: Path, uri: str, *extra: str) -> list[str]:
    return ["mount", uri, str(place / "mnt"), "--cache-dir", str(place / "cache"), *extra]


# --- usage errors: nothing is contacted --------------------------------------------


@pytest.mark.parametrize(
    ("uri_or_args", "needle"),
    [
        (["ftp://x"], "ftp"),
        (["s3://"], "bucket"),
        (["s3:///just-a-path"], "bucket"),
        (["not-a-uri"], "uri"),
        (["file://relative/dir"], "file"),
        (["DATA", "--cache-size", "lots"], "lots"),
        (["DATA", "--block-size", "1K"], "block size"),
        (["DATA", "--meta-ttl", "soon"], "soon"),
        (["DATA", "--file-mode", "rw-r--r--"], "mode"),
        (["DATA", "--uid", "root"], "number"),
        (["DATA", "-o", "bogus_option"], "bogus_option"),
        (["DATA", "-o", "cache_size"], "cache_size"),
        (["DATA", "-o", "ro=yes"], "ro"),
        (["DATA", "--cache-peers", "10.0.0.7"], "--cache-peers wants HOST:PORT"),
        (["DATA", "-o", "cache_peers=a:1+b"], "--cache-peers wants HOST:PORT"),
        (["DATA", "--cache-token-file", "/nonexistent/token"], "cannot read token file"),
    ],
)
def test_usage_errors(place: Path, uri_or_args: list[str], needle: str) -> None:
    uri, *extra = uri_or_args
    if uri == "DATA":
        uri = f"file://{place / 'data'}"
    result = run_cli(*mount_args(place, uri, *extra), timeout=30)
    assert result.returncode == 2
    assert_one_line_error(result, needle)
    assert not _is_mounted(place / "mnt")


# --- the mountpoint ---------------------------------------------------------------


def test_mountpoint_missing(place: Path) -> None:
    result = run_cli("mount", f"file://{place / 'data'}", str(place / "nope"))
    assert_one_line_error(result, "does not exist")


def test_mountpoint_not_a_directory(place: Path) -> None:
    (place / "file").write_text("x")
    result = run_cli("mount", f"file://{place / 'data'}", str(place / "file"))
    assert_one_line_error(result, "not a directory")


def test_mountpoint_busy(place: Path) -> None:
    backing = Backing(uri=f"file://{place / 'data'}", local_dir=place / "data")
    with mounted(backing) as m:
        result = run_cli(*mount_args(place, backing.uri)[:2], str(m.root))
        assert_one_line_error(result, "busy")
        assert os.listdir(m.root) == []  # the first mount is unharmed


def test_cache_dir_in_use(place: Path) -> None:
    backing = Backing(uri=f"file://{place / 'data'}", local_dir=place / "data")
    with mounted(backing) as m:
        result = run_cli("mount", backing.uri, str(place / "mnt"), "--cache-dir", str(m.cache_dir))
        assert_one_line_error(result, "in use")
    assert not _is_mounted(place / "mnt")


def test_local_dir_missing(place: Path) -> None:
    result = run_cli(*mount_args(place, f"file://{place / 'missing'}"))
    assert_one_line_error(result)
    assert not _is_mounted(place / "mnt")


def test_no_dev_fuse(place: Path) -> None:
    """In a mount namespace whose /dev has no fuse device (a container without it)."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare(1) and root to hide /dev/fuse in a private mount namespace")
    cli = " ".join(CLI + mount_args(place, f"file://{place}"))
    script = f"mount -t tmpfs tmpfs /dev && exec {cli}"
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert_one_line_error(result, "/dev/fuse")
    assert result.returncode == 1


def test_umount_of_a_path_that_is_not_mounted(place: Path) -> None:
    result = run_cli("umount", str(place / "mnt"))
    assert result.returncode == 2
    assert_one_line_error(result, "not mounted")


# --- S3 failures at mount time -------------------------------------------------------


def test_missing_bucket(place: Path, s3_server: S3Server) -> None:
    result = run_cli(*mount_args(place, "s3://no-such-bucket-here"), env=s3_server.env())
    assert result.returncode == 1
    assert_one_line_error(result, "no-such-bucket-here", "does not exist")
    assert not _is_mounted(place / "mnt")


def test_bad_credentials(place: Path) -> None:
    with running_s3_server() as server:
        server.client().create_bucket(Bucket="locked")
        req = urllib.request.Request(
            server.endpoint + "/moto-api/reset-auth",
            data=json.dumps(0).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        urllib.request.urlopen(req, timeout=10).read()
        result = run_cli(*mount_args(place, "s3://locked"), env=server.env())
    assert result.returncode == 1
    assert_one_line_error(result, "credentials")
    assert not _is_mounted(place / "mnt")


def test_unreachable_endpoint(place: Path, s3_server: S3Server) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    result = run_cli(
        *mount_args(place, "s3://whatever", "--s3-endpoint", endpoint), env=s3_server.env()
    )
    took = time.monotonic() - t0
    assert result.returncode == 1
    assert_one_line_error(result, "127.0.0.1")
    assert took < 30, took
    assert not _is_mounted(place / "mnt")


# --- success --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_mount_is_usable_on_return_and_umount_ends_the_daemon(
    place: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    (place / "data" / "hello.txt").write_text("hi")
    env = dict(os.environ)
    if kind == "local":
        uri = f"file://{place / 'data'}"
    else:
        s3: S3Server = request.getfixturevalue("s3_server")
        s3.client().create_bucket(Bucket="cli-success")
        s3.client().put_object(Bucket="cli-success", Key="hello.txt", Body=b"hi")
        uri = "s3://cli-success"
        env = s3.env()
    result = run_cli(*mount_args(place, uri, "--log-file", str(place / "log")), env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    mnt = place / "mnt"
    # usable at once: no sleep, no retry
    assert os.listdir(mnt) == ["hello.txt"]
    assert (mnt / "hello.txt").read_text() == "hi"
    pid = runtime.read_pid(os.path.realpath(mnt))
    assert pid is not None and _alive(pid)

    result = run_cli("umount", str(mnt))
    assert result.returncode == 0, result.stderr
    assert not _is_mounted(mnt)
    assert not _alive(pid), f"mount process {pid} still running after umount"
    assert runtime.read_pid(os.path.realpath(mnt)) is None


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")
