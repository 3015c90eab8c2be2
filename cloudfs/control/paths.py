"""Where a running mount leaves its files: its pid file, its control socket and the
socket that serves its blocks to the node's other processes.

They live in the runtime directory under a name derived from the mountpoint,
so the mount process (which creates them) and the CLI commands that address
it (``cloudfs umount``, ``stats``, ``warmup``, ``flush``) meet there knowing
only the mountpoint.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def runtime_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/run/cloudfs")
    base = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/cloudfs-{os.geteuid()}"
    return Path(base) / "cloudfs"


def pid_file(mountpoint: str) -> Path:
    """The pid file of the mount at ``mountpoint``, an already resolved path.

    (Resolving it here would stat the mountpoint, which the mounting process
    itself must not do before it serves requests.)
    """
    return runtime_dir() / f"{_digest(mountpoint)}.pid"


def control_socket(mountpoint: str) -> Path:
    """The control socket of the mount at ``mountpoint`` (see ``cloudfs.control``)."""
    return pid_file(mountpoint).with_suffix(".sock")


def hints_socket(mountpoint: str) -> Path:
    """The socket where any user's job announces its reading order (``cloudfs.hints``)."""
    return pid_file(mountpoint).with_suffix(".hints")


def hints_socket_candidates(mountpoint: str) -> list[Path]:
    """Where a job may find ``hints_socket``: the mount may be its own user's or root's."""
    own = hints_socket(mountpoint)
    digest_name = own.name
    system = Path("/run/cloudfs") / digest_name
    return [own] if own == system else [own, system]


def local_blocks_socket(salt: str, mountpoint: str) -> Path:
    """Where the mount at ``mountpoint`` serves its blocks, salted with ``salt``
    (``MountConfig.store_id``), to processes of its user (``cloudfs.client``).

    Named by the salt first, so a process that knows only the volume (its tree
    address and name, hence the salt) finds every mount of it by glob.
    """
    return runtime_dir() / f"blocks-{_digest(salt)}-{_digest(mountpoint)}.sock"


def local_blocks_sockets(salt: str) -> list[Path]:
    """Every ``local_blocks_socket`` of the volume salted ``salt``, newest first (a
    stale one, of a mount killed without unmounting, is older than its successor)."""
    found: list[tuple[float, Path]] = []
    for path in runtime_dir().glob(f"blocks-{_digest(salt)}-*.sock"):
        try:
            found.append((path.stat().st_mtime, path))
        except OSError:  # removed meanwhile: an unmount
            continue
    return [path for _, path in sorted(found, reverse=True)]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tree_socket(mountpoint: str) -> Path:
    """The gRPC tree service (``unix:`` address) of an embedded mount, for ``cloudfs:///PATH``.

    Mode 0600 like the control socket: only the mount's user reaches the tree
    through it (``cloudfs.mount.local_tree``).
    """
    return pid_file(mountpoint).with_suffix(".tree")
