"""The client side of the hints socket: which mount holds a path, and one connection each.

Paths are mapped to mounts with one read of /proc/self/mountinfo; a path's
directory is resolved once (``realpath``), so symlinked dataset directories
work and a million files in a few directories cost a few resolutions.
"""

from __future__ import annotations

import logging
import os

from cloudfs import mountinfo
from cloudfs.control import paths
from cloudfs.errors import FsError
from cloudfs.lib.jsonlines import ChannelError, JsonLinesClient, Message

CONNECT_TIMEOUT = 5.0
# How long a mount may take to resolve an order and answer (it works as the lines arrive).
ANSWER_TIMEOUT = 300.0
# How long ending a held announcement waits for the mount to say the job has ended.
END_TIMEOUT = 10.0
DIRS_REMEMBERED = 4096

log = logging.getLogger(__name__)


class HintError(Exception):
    """A mount did not take a hint: it does not answer, or refused the request."""


class MountConnection:
    """One announcement's connection to one mount: lines out, then its answer."""

    def __init__(self, mountpoint: str, request: Message) -> None:
        self.mountpoint = mountpoint
        self.answer: Message = {}
        self._held = False
        self._channel = _connect(mountpoint)
        self.send(request)

    def send(self, message: Message) -> None:
        try:
            self._channel.send(message)
        except (ChannelError, FsError) as e:
            raise self._failed(e) from None

    def finish(self, detach: bool) -> None:
        """End the order; read the mount's answer (a held connection stays open)."""
        self.send_end()
        self.answer = self._read()
        if detach:
            self._read()  # the final line
            self.close()
        else:
            self._held = True

    def start_ending(self) -> None:
        """Begin ending a held order: the mount sees the end of the stream."""
        if self._held:
            try:
                self._channel.shutdown_send()
            except ChannelError:
                self._held = False  # the mount is gone: nothing to wait for

    def wait_ended(self) -> None:
        """Wait for the mount's final line: once it came, the job's figures are final
        (``cloudfs_job_finished`` 1). Never raises: a mount that does not answer
        in ``END_TIMEOUT`` seconds ends the job when the connection closes."""
        if not self._held:
            return
        self._held = False
        try:
            self._channel.read(END_TIMEOUT)
        except (ChannelError, FsError) as e:
            log.warning("cloudfs.hints: %s: ending the announcement: %s", self.mountpoint, e)

    def send_end(self) -> None:
        try:
            self._channel.send_end()
        except (ChannelError, FsError) as e:
            raise self._failed(e) from None

    def ask(self) -> Message:
        """The final answer of a one-line request (the mount reads nothing after it)."""
        return self._read()

    def close(self) -> None:
        self._channel.close()

    def _read(self) -> Message:
        try:
            return self._channel.read(ANSWER_TIMEOUT)
        except (ChannelError, FsError) as e:
            raise self._failed(e) from None

    def _failed(self, error: ChannelError | FsError) -> HintError:
        """The mount refused (its message), or did not answer as it should
        (``ChannelError``: it names the mount and what went wrong)."""
        if isinstance(error, ChannelError):
            return HintError(str(error))
        return HintError(f"{self.mountpoint}: {error}")


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


def _connect(mountpoint: str) -> JsonLinesClient:
    for candidate in paths.hints_socket_candidates(mountpoint):
        if not candidate.exists():
            continue
        try:
            return JsonLinesClient(
                candidate, timeout=CONNECT_TIMEOUT, peer=f"{mountpoint}: the mount"
            )
        except (OSError, ChannelError) as e:
            raise HintError(f"{mountpoint}: cannot reach the mount's hints socket ({e})") from None
    raise HintError(f"{mountpoint}: the mount has no hints socket (an older CloudFS, or it died)")
