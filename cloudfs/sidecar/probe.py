"""The sidecar's startup probe: every path is a CloudFS mount that answers.

kubelet runs ``cloudfs sidecar probe PATH...`` until it exits 0; only then do
the app containers start. A path passes when the newest mount there is
``fuse.cloudfs`` and ``statvfs`` of it returns within ``timeout`` seconds (a
wedged FUSE daemon would block the call: it runs in a daemon thread).
"""

from __future__ import annotations

import os
import threading

from cloudfs import mountinfo

FS_TYPE = "fuse.cloudfs"


def problem(path: str, timeout: float) -> str | None:
    """Why ``path`` is not an answering CloudFS mount; None when it is."""
    real = os.path.realpath(path)
    try:
        mount = mountinfo.topmost(mountinfo.read(), real)
    except (OSError, ValueError) as exc:
        return f"cannot read the mount table: {exc}"
    if mount is None or mount.fs_type != FS_TYPE:
        return f"{path}: not mounted yet" if mount is None else f"{path}: a {mount.fs_type} mount"
    outcome: list[BaseException | None] = []

    def ask() -> None:
        try:
            os.statvfs(real)
            outcome.append(None)
        except OSError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=ask, name="probe", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        return f"{path}: the mount did not answer within {timeout:g} s"
    if outcome[0] is not None:
        return f"{path}: {outcome[0]}"
    return None
