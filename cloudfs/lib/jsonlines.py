"""JSON lines over a UNIX socket: the framing, and the one client of it.

What a mount's control and hints sockets and the scheduler's socket speak. One
request per connection: the client sends one JSON object on one line
(``{"op": "warmup", ...}``); the server answers with JSON lines, zero or more
events, then exactly one final line carrying ``"done": true`` (and the result)
or ``"error": message`` with ``"errno"``. Lines are UTF-8 and at most
``MAX_LINE`` bytes. A streaming request (an epoch's file order) is followed by
more lines from the client, ended by an empty line (``END``).

``JsonLinesClient`` is the client side: it connects with a timeout, sends
lines, and reads events and the final line; an error line becomes an
``FsError`` with the server's errno. A server that does not answer in time,
closes the connection before its final line or sends something that is not a
JSON object is a ``ChannelError``. Which socket and which requests are the
callers' (``cloudfs.control.client``, ``cloudfs.hints.client``,
``cloudfs.jobs.client``); the servers (``cloudfs.control.server``,
``cloudfs.jobs.server``) frame their lines with ``encode``, ``decode``,
``LineBuffer`` or ``read_line``, ``done`` and ``error``.
"""

from __future__ import annotations

import errno as E
import json
import os
import socket
from collections.abc import Iterator
from types import TracebackType
from typing import Any, BinaryIO, Protocol, cast

from cloudfs.errors import FsError, StartupError

MAX_LINE = 16 * 1024 * 1024
END = b"\n"  # the empty line that ends a streaming request's lines
Message = dict[str, Any]


def encode(message: Message) -> bytes:
    """One line: compact JSON and its newline."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> Message:
    """One message; ``ValueError`` for anything but a JSON object (nesting too deep
    for the parser included: json's ``RecursionError`` would end the server)."""
    try:
        value = json.loads(line)
    except RecursionError:
        raise ValueError("a message nested too deeply") from None
    if not isinstance(value, dict):
        raise ValueError("a message is a JSON object")
    return value


def done(result: Message) -> Message:
    """The final line of a request that worked."""
    return {"done": True, **result}


def error(message: str, errno: int) -> Message:
    """The final line of a request that failed."""
    return {"error": message, "errno": errno}


def failure(message: Message) -> FsError | None:
    """The ``FsError`` an error line stands for (its errno, EIO if it has none or a
    bad one); None for any other line."""
    if "error" not in message:
        return None
    number = message.get("errno")
    valid = isinstance(number, int) and not isinstance(number, bool) and 0 < number < 4096
    return FsError(str(message["error"]), errno=number if valid else E.EIO)


class LineBuffer:
    """Bytes as they arrive, split into lines of at most ``limit`` bytes (an async
    server's reader: it feeds what it receives, and takes whole lines out)."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit = limit
        self._buf = bytearray()
        self._scanned = 0  # the bytes known to hold no newline

    def feed(self, data: bytes) -> None:
        self._buf += data

    def line(self) -> bytes | None:
        """The next whole line, without its newline; None while none has arrived yet;
        ``ValueError`` once more than ``limit`` bytes came without a newline."""
        end = self._buf.find(b"\n", self._scanned)
        if end < 0:
            self._scanned = len(self._buf)
            if len(self._buf) > self.limit:
                raise ValueError("line too long")
            return None
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        self._scanned = 0
        return line

    def rest(self) -> bytes:
        """What arrived after the last newline (the stream ended): taken as a last line."""
        rest = bytes(self._buf)
        self._buf.clear()
        self._scanned = 0
        return rest


class Readable(Protocol):
    def readline(self, size: int = -1, /) -> bytes: ...


def read_line(lines: Readable) -> bytes:
    """The next line of a blocking reader (with its newline); b"" at the end;
    ``ValueError`` for one past ``MAX_LINE`` bytes."""
    line = lines.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE and not line.endswith(b"\n"):
        raise ValueError(f"a line over {MAX_LINE} bytes")
    return line


class ChannelError(StartupError):
    """The server did not answer as the protocol says: no answer within the timeout,
    the connection closed before the final line, or a line that is not a JSON object."""


class JsonLinesClient:
    """One connection to a JSON-lines server on a UNIX socket: lines out, events and
    the final line back (one request per connection). A context manager: leaving it
    closes the connection."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float, peer: str) -> None:
        """Connect to the socket ``path``; ``OSError`` as ``connect`` raised it
        (``FileNotFoundError`` or ``ConnectionRefusedError`` where nothing listens),
        ``ChannelError`` if it was not accepted in time.
        ``timeout``: of the connect, and of each send and read until ``read`` is given
        another; ``peer``: the server as errors name it ("the scheduler")."""
        self.peer = peer
        self._timeout = timeout
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(os.fspath(path))
        except TimeoutError:  # it listens, but accepts nothing (its backlog is full)
            sock.close()
            raise ChannelError(f"{peer} gave no answer within {timeout:g} s") from None
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._lines = cast(BinaryIO, sock.makefile("rb"))

    def send(self, message: Message) -> None:
        """One line; ``FsError`` (EMSGSIZE) for one past ``MAX_LINE`` bytes, which the
        server would refuse, ``ChannelError`` if the server closed the connection."""
        data = encode(message)
        if len(data) > MAX_LINE:
            raise FsError(f"a request line over {MAX_LINE} bytes", errno=E.EMSGSIZE)
        self._send(data)

    def send_end(self) -> None:
        """The empty line that ends a streaming request's lines."""
        self._send(END)

    def read(self, timeout: float | None = None) -> Message:
        """The next line, an event or the final one (``done``); ``FsError`` with the
        server's errno for an error line. ``timeout``: for this read and what follows."""
        if timeout is not None:
            self._timeout = timeout
        try:
            self._sock.settimeout(self._timeout)
            line = read_line(self._lines)
        except TimeoutError:
            raise ChannelError(f"{self.peer} gave no answer within {self._timeout:g} s") from None
        except OSError as e:
            raise ChannelError(f"{self.peer}: {e}") from None
        except ValueError:
            raise ChannelError(f"{self.peer} sent a line over {MAX_LINE} bytes") from None
        if not line:
            raise ChannelError(f"{self.peer} closed the connection without an answer")
        try:
            message = decode(line)
        except ValueError as e:
            raise ChannelError(f"{self.peer} sent a garbled answer ({e})") from None
        refused = failure(message)
        if refused is not None:
            raise refused
        return message

    def events(self) -> Iterator[Message]:
        """Each line until the final one, which is the last yielded."""
        while True:
            message = self.read()
            yield message
            if message.get("done"):
                return

    def reply(self) -> Message:
        """The final line (events skipped)."""
        *_, final = self.events()
        return final

    def shutdown_send(self) -> None:
        """Tell the server nothing more will be sent (its read sees the end of the
        stream); its answer can still be read."""
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError as e:
            raise ChannelError(f"{self.peer}: {e}") from None

    def close(self) -> None:
        self._lines.close()
        self._sock.close()

    def __enter__(self) -> JsonLinesClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except TimeoutError:
            raise ChannelError(f"{self.peer} took nothing within {self._timeout:g} s") from None
        except OSError as e:
            raise ChannelError(f"{self.peer} closed the connection ({e})") from None
