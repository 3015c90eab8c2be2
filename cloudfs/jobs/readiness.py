"""Make a job's data ready: its volumes mounted, its datasets there and cached enough.

For each volume, a CloudFS mount already at its path is used as it is;
otherwise it is mounted (``cloudfs mount URI PATH``, in the background, cache
under the scheduler's state directory) and left mounted after the job, so the
next job on the same data finds it warm. Every dataset path must exist. Then,
if the spec asks for ``min_cached``, the datasets' files are warmed through the
mount's control socket (as ``cloudfs warmup`` does) until that fraction of
their bytes is cached, reporting progress, and then checked; a cache too small
to hold that much keeps the job warming until ``readiness.timeout``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cloudfs import mountinfo
from cloudfs.control import client
from cloudfs.errors import FsError, StartupError, UsageError
from cloudfs.jobs.spec import JobSpec, Volume

BATCH = 1000  # inodes per check request
WARM_BATCH = 200  # inodes per warm-up request; the progress is measured after each
Progress = Callable[[int, int], None]  # (cached bytes, total bytes)


class NotReady(FsError):
    """The job's data cannot be made ready (mount failed, dataset missing, timeout)."""


class Cancelled(Exception):
    """The job was cancelled while its data was being made ready."""


@dataclass(frozen=True, slots=True)
class DataFile:
    inode: int
    size: int


def prepare(
    spec: JobSpec, cache_root: Path, progress: Progress, cancelled: Callable[[], bool]
) -> None:
    """Mount, check and warm; ``NotReady`` or ``Cancelled`` if that cannot finish."""
    deadline = time.monotonic() + spec.readiness_timeout
    for i, volume in enumerate(spec.volumes):
        _ensure_mounted(i, volume, cache_root)
    for path in spec.datasets:
        if not os.path.exists(path):
            raise NotReady(f"dataset path {path} does not exist", errno=errno.ENOENT)
    if spec.min_cached <= 0 or not spec.datasets:
        return
    by_mount: dict[str, list[DataFile]] = {}
    for path in spec.datasets:
        try:
            by_mount.setdefault(client.mountpoint_of(path), []).extend(_files(path))
        except (UsageError, OSError) as e:
            raise NotReady(f"dataset path {path}: {getattr(e, 'strerror', None) or e}") from None
    total = sum(f.size for files in by_mount.values() for f in files)
    target = spec.min_cached * total
    cached = _cached(by_mount)
    progress(cached, total)
    if cached >= target:
        return
    if cancelled():
        raise Cancelled
    for mountpoint, files in by_mount.items():
        for start in range(0, len(files), WARM_BATCH):
            _warm(mountpoint, files[start : start + WARM_BATCH], deadline, cancelled)
            cached = _cached(by_mount)
            progress(cached, total)
            if cached >= target:
                return
    while True:
        cached = _cached(by_mount)
        progress(cached, total)
        if cached >= target:
            return
        if time.monotonic() > deadline:
            share = 100 * cached / total if total else 100
            raise NotReady(
                f"only {share:.0f}% of the datasets cached after {spec.readiness_timeout:g} s "
                f"(needs {100 * spec.min_cached:.0f}%: is the cache large enough?)",
                errno=errno.ETIMEDOUT,
            )
        if cancelled():
            raise Cancelled
        time.sleep(1.0)


def _ensure_mounted(i: int, volume: Volume, cache_root: Path) -> None:
    real = os.path.realpath(volume.mount)
    mounted = mountinfo.topmost(mountinfo.read(), real)
    if mounted is not None and mounted.fs_type == "fuse.cloudfs":
        return
    if not volume.uri:
        raise NotReady(
            f"volumes[{i}]: no CloudFS mount at {volume.mount}, and no uri to mount",
            errno=errno.ENOENT,
        )
    digest = hashlib.sha256(f"{volume.uri}\0{real}".encode()).hexdigest()[:16]
    cache = cache_root / digest
    cache.mkdir(parents=True, exist_ok=True)
    os.makedirs(real, exist_ok=True)
    command = [sys.executable, "-m", "cloudfs.cli.main", "mount", volume.uri, real,
               "--cache-dir", str(cache), "--log-file", str(cache / "mount.log"),
               *volume.options]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise NotReady(f"volumes[{i}]: mounting {volume.uri} took over 120 s") from None
    if done.returncode != 0:
        message = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise NotReady(f"volumes[{i}]: cannot mount {volume.uri} at {real}: {message}")


def _files(path: str) -> Iterator[DataFile]:
    st = os.stat(path)
    if stat.S_ISREG(st.st_mode):
        yield DataFile(st.st_ino, st.st_size)
        return
    for root, _dirs, names in os.walk(path):
        for name in sorted(names):
            try:
                st = os.stat(os.path.join(root, name), follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                yield DataFile(st.st_ino, st.st_size)


def _cached(by_mount: dict[str, list[DataFile]]) -> int:
    cached = 0
    for mountpoint, files in by_mount.items():
        for start in range(0, len(files), BATCH):
            inodes = [f.inode for f in files[start : start + BATCH]]
            try:
                answer = client.result(mountpoint, {"op": "check", "inodes": inodes}, timeout=60)
            except StartupError as e:
                raise NotReady(str(e)) from None
            cached += int(answer.get("cached_bytes", 0))
    return cached


def _warm(
    mountpoint: str, files: list[DataFile], deadline: float, cancelled: Callable[[], bool]
) -> None:
    request = {"op": "warmup", "inodes": [f.inode for f in files], "parallel": 8, "to": None}
    try:
        for _event in client.call(mountpoint, request, timeout=60):
            if cancelled():
                raise Cancelled
            if time.monotonic() > deadline:
                return
    except StartupError as e:
        raise NotReady(str(e)) from None
