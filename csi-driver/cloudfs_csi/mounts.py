"""The node's mount table and the mount operations the driver makes on it.

Mount points are read from ``/proc/self/mountinfo`` by ``cloudfs.mountinfo``;
binds and unmounts go through util-linux ``mount``/``umount``, as kubelet's
own mount utilities do. A mount whose FUSE process died stays in the
table, and calls on it fail with ENOTCONN ("Transport endpoint is not
connected") or ECONNABORTED: ``probe`` tells the two apart with ``statvfs``,
which always reaches the FUSE process (``stat`` of the root may be answered
from the kernel's attribute cache for a while after the process died).
"""

from __future__ import annotations

import enum
import errno
import os
import subprocess

from cloudfs import mountinfo
from cloudfs.mountinfo import Mount
from cloudfs_csi.errors import Internal

COMMAND_TIMEOUT = 60.0
DEAD_ERRNOS = frozenset({errno.ENOTCONN, errno.ECONNABORTED})


class Health(enum.Enum):
    HEALTHY = "healthy"  # mounted, answers stat
    DISCONNECTED = "disconnected"  # mounted, but its FUSE process is gone (ENOTCONN)
    NOT_MOUNTED = "not mounted"


class MountTable:
    """Mount operations on one mount namespace (the driver's own)."""

    def __init__(self, path: str = mountinfo.PROC_MOUNTINFO) -> None:
        self._mountinfo = path

    def entries(self) -> dict[str, Mount]:
        """Mount point -> its topmost mount."""
        return {mount.mount_point: mount for mount in mountinfo.read(self._mountinfo)}

    def entry(self, path: str) -> Mount | None:
        return self.entries().get(path)

    def is_mounted(self, path: str) -> bool:
        return path in self.entries()

    def probe(self, path: str) -> Health:
        if not self.is_mounted(path):
            return Health.NOT_MOUNTED
        try:
            os.statvfs(path)
        except OSError as exc:
            if exc.errno in DEAD_ERRNOS:
                return Health.DISCONNECTED
            raise
        return Health.HEALTHY

    def bind(self, source: str, target: str, *, read_only: bool) -> None:
        """Bind ``source`` at ``target``; a read-only bind refuses writes with EROFS."""
        _run(["mount", "--bind", source, target], f"bind {target}")
        if read_only:
            try:
                _run(["mount", "-o", "remount,bind,ro", target], f"make {target} read-only")
            except Internal:
                self.unmount(target, lazy=True)
                raise

    def unmount(self, path: str, *, lazy: bool = False) -> None:
        _run(["umount", *(["-l"] if lazy else []), path], f"unmount {path}")


def _run(cmd: list[str], what: str) -> None:
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Internal(f"cannot {what}: {exc}") from None
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise Internal(f"cannot {what}: {lines[-1] if lines else f'exit {result.returncode}'}")
