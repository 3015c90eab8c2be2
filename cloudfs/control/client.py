"""The CLI side of the control channel: find a path's mount, send one request, read events."""

from __future__ import annotations

import os
from collections.abc import Iterator

from cloudfs import mountinfo
from cloudfs.control import paths
from cloudfs.errors import StartupError, UsageError
from cloudfs.lib.jsonlines import JsonLinesClient, Message


def mountpoint_of(path: str) -> str:
    """The CloudFS mount holding ``path`` (the deepest one), or a ``UsageError``."""
    real = os.path.realpath(path)
    best = None
    for mount in mountinfo.read():
        mnt = mount.mount_point
        if mount.fs_type != "fuse.cloudfs":
            continue
        inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
        if inside and (best is None or len(mnt) > len(best)):
            best = mnt
    if best is None:
        raise UsageError(f"{path} is not on a CloudFS mount")
    return best


def call(mountpoint: str, request: Message, *, timeout: float) -> Iterator[Message]:
    """Send ``request`` to the mount at ``mountpoint``; yield its events, then its result.

    ``timeout`` bounds the wait for each line. The final line's error becomes an
    ``FsError`` with the server's errno; a mount that does not answer, or not in
    time, a ``StartupError``.
    """
    try:
        channel = JsonLinesClient(
            paths.control_socket(mountpoint),
            timeout=timeout,
            peer=f"{mountpoint}: the mount process",
        )
    except (FileNotFoundError, ConnectionRefusedError):
        raise StartupError(
            f"{mountpoint}: the mount process does not answer (not a CloudFS mount of this "
            "user, or it has died)"
        ) from None
    with channel:
        channel.send(request)
        yield from channel.events()


def result(mountpoint: str, request: Message, *, timeout: float = 10.0) -> Message:
    """The final result of a request that sends no progress events."""
    messages = list(call(mountpoint, request, timeout=timeout))
    return messages[-1]
