"""The client side of the hints socket: which mount holds a path, and one connection each.

Paths are mapped to mounts with one read of /proc/self/mountinfo; a path's
directory is resolved once (``realpath``), so symlinked dataset directories
work and a million files in a few directories cost a few resolutions.
"""

from __future__ import annotations

import os
import socket

from cloudfs import mountinfo
from cloudfs.control import paths
from cloudfs.control.protocol import MAX_LINE, Message, decode, encode

CONNECT_TIMEOUT = 5.0
# How long a mount may take to resolve an order and answer (it works as the lines arrive).
ANSWER_TIMEOUT = 300.0
DIRS_REMEMBERED = 4096


class HintError(Exception):
    """A mount did not take a hint: it does not answer, or refused the request."""


class MountConnection:
    """One announcement's connection to one mount: lines out, then its answer."""

    def __init__(self, mountpoint: str, request: Message) -> None:
        self.mountpoint = mountpoint
        self.answer: Message = {}
        self._sock = _connect(mountpoint)
        self._lines = self._sock.makefile("rb")
        self.send(request)

    def send(self, message: Message) -> None:
        data = encode(message)
        if len(data) > MAX_LINE:
            raise HintError(f"{self.mountpoint}: a request line over {MAX_LINE} bytes")
        try:
            self._sock.sendall(data)
        except OSError as e:
            raise HintError(f"{self.mountpoint}: the mount closed the connection ({e})") from None

    def finish(self, detach: bool) -> None:
        """End the order; read the mount's answer (a held connection stays open)."""
        self.send_end()
        self.answer = self._read(ANSWER_TIMEOUT)
        if detach:
            self._read(ANSWER_TIMEOUT)  # the final line
            self.close()

    def send_end(self) -> None:
        try:
            self._sock.sendall(b"\n")
        except OSError as e:
            raise HintError(f"{self.mountpoint}: the mount closed the connection ({e})") from None

    def _read(self, timeout: float) -> Message:
        self._sock.settimeout(timeout)
        try:
            line = self._lines.readline(MAX_LINE + 1)
        except TimeoutError:
            raise HintError(f"{self.mountpoint}: no answer within {timeout:g} s") from None
        except OSError as e:
            raise HintError(f"{self.mountpoint}: {e}") from None
        if not line:
            raise HintError(f"{self.mountpoint}: the mount closed the connection")
        try:
            message = decode(line)
        except ValueError:
            raise HintError(f"{self.mountpoint}: a garbled answer") from None
        if "error" in message:
            raise HintError(f"{self.mountpoint}: {message['error']}")
        return message

    def ask(self) -> Message:
        """The final answer of a one-line request (the mount reads nothing after it)."""
        return self._read(ANSWER_TIMEOUT)

    def close(self) -> None:
        self._lines.close()
        self._sock.close()


class Router:
    """Maps paths to (mountpoint, path inside it) and holds one connection per mount."""

    def __init__(self) -> None:
        self._mounts = sorted(
            (m.mount_point for m in mountinfo.read() if m.fs_type == "fuse.cloudfs"),
            key=len,
            reverse=True,
        )
        self._dirs: dict[str, str] = {}
        self._connections: dict[str, MountConnection] = {}

    def route(self, path: str) -> tuple[str, str] | None:
        head, name = os.path.split(os.path.abspath(path))
        real = self._dirs.get(head)
        if real is None:
            if len(self._dirs) >= DIRS_REMEMBERED:
                self._dirs.clear()
            real = self._dirs[head] = os.path.realpath(head)
        full = os.path.join(real, name)
        for mnt in self._mounts:
            prefix = mnt.rstrip("/") + "/"
            if full.startswith(prefix):
                return mnt, full[len(prefix) :]
        return None

    def connection(self, mountpoint: str, request: Message) -> MountConnection:
        found = self._connections.get(mountpoint)
        if found is None:
            found = self._connections[mountpoint] = MountConnection(mountpoint, request)
        return found

    def connections(self) -> list[MountConnection]:
        return list(self._connections.values())

    def ask(self, mountpoint: str, request: Message) -> Message:
        connection = MountConnection(mountpoint, request)
        try:
            return connection.ask()
        finally:
            connection.close()

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()


def _connect(mountpoint: str) -> socket.socket:
    for candidate in paths.hints_socket_candidates(mountpoint):
        if not candidate.exists():
            continue
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_TIMEOUT)
        try:
            sock.connect(str(candidate))
        except OSError as e:
            sock.close()
            raise HintError(f"{mountpoint}: cannot reach the mount's hints socket ({e})") from None
        return sock
    raise HintError(f"{mountpoint}: the mount has no hints socket (an older CloudFS, or it died)")
