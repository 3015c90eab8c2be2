"""The CLI side of the control channel: find a path's mount, send one request, read events."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import BinaryIO

from cloudfs import mountinfo
from cloudfs.control import paths
from cloudfs.control.protocol import MAX_LINE, Message, decode, encode
from cloudfs.errors import FsError, StartupError, UsageError


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
    ``FsError`` with the server's errno.
    """
    path = paths.control_socket(mountpoint)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            raise StartupError(
                f"{mountpoint}: the mount process does not answer (not a CloudFS mount of this "
                "user, or it has died)"
            ) from None
        sock.sendall(encode(request))
        yield from _events(sock.makefile("rb"), mountpoint)  # type: ignore[arg-type]
    except TimeoutError:
        raise StartupError(f"{mountpoint}: no answer within {timeout:g} s") from None
    finally:
        sock.close()


def _events(lines: BinaryIO, mountpoint: str) -> Iterator[Message]:
    while True:
        line = lines.readline(MAX_LINE + 1)
        if not line:
            raise StartupError(f"{mountpoint}: the mount process closed the connection")
        message = decode(line)
        if "error" in message:
            raise FsError(str(message["error"]), errno=int(message.get("errno", 5)))
        yield message
        if message.get("done"):
            return


def result(mountpoint: str, request: Message, *, timeout: float = 10.0) -> Message:
    """The final result of a request that sends no progress events."""
    messages = list(call(mountpoint, request, timeout=timeout))
    return messages[-1]
