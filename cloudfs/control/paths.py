"""Where a running mount leaves its files: its pid file and its control socket.

Both live in the runtime directory under a name derived from the mountpoint,
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
    digest = hashlib.sha256(mountpoint.encode()).hexdigest()[:16]
    return runtime_dir() / f"{digest}.pid"


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


def tree_socket(mountpoint: str) -> Path:
    """The gRPC tree service (``unix:`` address) of an embedded mount, for ``cloudfs:///PATH``.

    Mode 0600 like the control socket: only the mount's user reaches the tree
    through it (``cloudfs.cli.local_tree``).
    """
    return pid_file(mountpoint).with_suffix(".tree")
