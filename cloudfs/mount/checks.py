"""Checks made before mounting, each failing with one clear line."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import logging
import os
import stat
from typing import IO

from cloudfs import mountinfo
from cloudfs.errors import StartupError

log = logging.getLogger(__name__)

MNT_DETACH = 2  # <sys/mount.h>: umount2's lazy detach


def check_mountpoint(mountpoint: str, *, take_over_dead: bool = False) -> None:
    """``take_over_dead``: a dead CloudFS mount there is detached first (``detach_dead``)."""
    if take_over_dead and detach_dead(mountpoint):
        log.warning("%s: detached the dead CloudFS mount there; mounting in its place", mountpoint)
    if not os.path.exists(mountpoint):
        raise StartupError(f"mountpoint {mountpoint} does not exist")
    if not os.path.isdir(mountpoint):
        raise StartupError(f"mountpoint {mountpoint} is not a directory")
    if holds_fuse_mount(mountpoint):
        raise StartupError(f"mountpoint {mountpoint} is busy: something is mounted there")


def holds_fuse_mount(mountpoint: str) -> bool:
    """A FUSE filesystem (CloudFS or another, live or dead) is the topmost mount at
    ``mountpoint``: mounting again would hide it. Any other mount there may be mounted
    over: a container's volume is a bind mount at its path (the sidecar's emptyDir at
    ``/cloudfs/mnt/VOLUME``), and the sidecar mounts CloudFS on top of it."""
    real = os.path.realpath(mountpoint)
    try:
        top = mountinfo.topmost(mountinfo.read(), real)
    except (OSError, ValueError):
        return is_mounted(mountpoint)  # no mount table to tell the kind: refuse any mount
    if top is None:
        return False
    return top.fs_type in ("fuse", "fuseblk") or top.fs_type.startswith("fuse.")


def is_mounted(mountpoint: str) -> bool:
    real = os.path.realpath(mountpoint)
    try:
        if mountinfo.topmost(mountinfo.read(), real) is not None:
            return True
    except (OSError, ValueError):
        pass
    try:
        return os.path.ismount(real)
    except OSError:  # a dead FUSE mount: "Transport endpoint is not connected"
        return True


def detach_dead(mountpoint: str) -> bool:
    """Lazily unmount the CloudFS mount at ``mountpoint`` if its process is gone (a statfs,
    which the kernel never answers from its cache, fails with ENOTCONN); True if there was
    one. A live mount, or another filesystem's, is left alone. The detach propagates like
    a mount (a sidecar's ``Bidirectional`` volume: the app containers see the new mount in
    its place)."""
    real = os.path.realpath(mountpoint)
    try:
        mount = mountinfo.topmost(mountinfo.read(), real)
    except (OSError, ValueError):
        return False
    if mount is None or mount.fs_type != "fuse.cloudfs":
        return False
    try:
        os.statvfs(real)  # statfs always reaches the daemon; a stat may be answered from cache
        return False
    except OSError as e:
        if e.errno not in (errno.ENOTCONN, errno.ECONNABORTED):  # the latter once aborted
            return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(os.fsencode(real), MNT_DETACH) != 0:
        code = ctypes.get_errno()
        raise StartupError(f"cannot detach the dead mount at {mountpoint}: {os.strerror(code)}")
    return True


def check_fuse_device() -> None:
    try:
        is_device = stat.S_ISCHR(os.stat("/dev/fuse").st_mode)
    except OSError:
        is_device = False
    if not is_device:
        raise StartupError(
            "no /dev/fuse: load the fuse module (modprobe fuse) or give the container /dev/fuse"
        )
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        raise StartupError("/dev/fuse is not readable and writable by this user")


def lock_cache_dir(cache_dir: str) -> IO[bytes]:
    """Hold the cache directory for this mount: two mounts must not share one tree."""
    try:
        os.makedirs(cache_dir, exist_ok=True)
        f = open(os.path.join(cache_dir, "lock"), "ab")  # noqa: SIM115 - held for the mount's life
    except OSError as e:
        raise StartupError(f"cannot use cache directory {cache_dir}: {e.strerror}") from None
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise StartupError(f"cache directory {cache_dir} is in use by another mount") from None
    return f
