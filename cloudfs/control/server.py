"""ControlServer: serves control requests inside the mount's trio loop.

Handlers are async callables ``handler(request, emit) -> result``: ``emit``
sends a progress event, the returned dict is the final ``done`` line, and an
``FsError`` becomes the final ``error`` line with its errno. A client that goes
away cancels its handler. Anything else a handler raises is a bug: logged with
its traceback, answered with EIO.

A streaming handler (``stream_handlers``) also gets the lines the client sends
after its request, as an async iterator of messages: how a list too long for
one line (an epoch's file order) arrives in bounded memory. The server puts the
caller's credentials into every request as ``PEER`` (pid, uid, gid from
SO_PEERCRED), replacing whatever the client sent there. A ``shared`` server's
socket is open to every user (mode 0666): its handlers must check ``PEER``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import trio

from cloudfs.control.protocol import PEER
from cloudfs.errors import FsError
from cloudfs.lib import jsonlines
from cloudfs.lib.jsonlines import Message, decode, encode

log = logging.getLogger(__name__)

# How long a streaming client may pause between two lines.
LINE_TIMEOUT = 30.0

Emit = Callable[[Message], Awaitable[None]]
Handler = Callable[[Message, Emit], Awaitable[Message]]
StreamHandler = Callable[[Message, "ClientLines", Emit], Awaitable[Message]]


class ControlServer:
    def __init__(
        self,
        path: Path,
        handlers: dict[str, Handler],
        *,
        stream_handlers: dict[str, StreamHandler] | None = None,
        shared: bool = False,
    ) -> None:
        self._path = path
        self._handlers = handlers
        self._stream_handlers = stream_handlers or {}
        self._shared = shared

    def bind(self) -> socket.socket:
        """Create the listening socket file (replacing a stale one), before trio runs."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket file is created 0600
        try:
            sock.bind(str(self._path))
        finally:
            os.umask(old_umask)
        if self._shared:
            self._path.parent.chmod(0o755)  # others must reach the socket to connect
            self._path.chmod(0o666)
        sock.listen(16)
        return sock

    async def serve(self, sock: socket.socket) -> None:
        """Serve connections on ``sock`` (from ``bind``) until cancelled; then remove the file."""
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
        try:
            await trio.serve_listeners(self._handle, [listener])
        finally:
            self._path.unlink(missing_ok=True)

    async def _handle(self, stream: trio.SocketStream) -> None:
        """One connection; whatever goes wrong with it ends it, never the server
        (``serve_listeners`` would end every connection and the mount's loop)."""
        try:
            await self._serve_one(stream)
        except Exception:
            log.exception("control connection failed")

    async def _serve_one(self, stream: trio.SocketStream) -> None:
        async with stream:
            reader = ClientLines(stream)
            try:
                with trio.fail_after(LINE_TIMEOUT):
                    request = decode(await reader.line())
            except (
                ValueError,
                trio.TooSlowError,
                trio.BrokenResourceError,
                trio.ClosedResourceError,
            ) as e:
                await _send_quietly(stream, jsonlines.error(f"bad request: {e}", errno.EINVAL))
                return
            request[PEER] = _peer(stream)

            async def emit(event: Message) -> None:
                await stream.send_all(encode(event))

            try:
                final = await self._dispatch(request, reader, emit)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the client went away
            await _send_quietly(stream, final)

    async def _dispatch(self, request: Message, reader: ClientLines, emit: Emit) -> Message:
        op = str(request.get("op"))
        stream_handler = self._stream_handlers.get(op)
        handler = self._handlers.get(op)
        if handler is None and stream_handler is None:
            return jsonlines.error(f"unknown operation {request.get('op')!r}", errno.EINVAL)
        try:
            if stream_handler is not None:
                result = await stream_handler(request, reader, emit)
            else:
                assert handler is not None
                result = await handler(request, emit)
        except FsError as e:
            return jsonlines.error(str(e), e.errno)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise
        except Exception:
            log.exception("control operation %r failed", request.get("op"))
            return jsonlines.error("internal error (see the mount's log)", errno.EIO)
        return jsonlines.done(result)


class ClientLines:
    """JSON lines from a client, each at most ``MAX_LINE`` bytes (``jsonlines.LineBuffer``)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._lines = jsonlines.LineBuffer()
        self._eof = False

    async def line(self) -> bytes:
        """The next line (without its newline); b"" at the end of the stream;
        ``ValueError`` for one past ``MAX_LINE``."""
        while True:
            line = self._lines.line()
            if line is not None:
                return line
            if self._eof:
                return self._lines.rest()
            chunk = await self._stream.receive_some(65536)
            if not chunk:
                self._eof = True
            self._lines.feed(chunk)

    async def closed(self) -> None:
        """Wait, however long, for the client to close the connection (ignoring what it sends)."""
        try:
            while await self.line() or not self._eof:
                pass
        except ValueError:
            return  # a line past MAX_LINE: taken as the end

    async def messages(self) -> AsyncIterator[Message]:
        """The messages after the request, until an empty line or the end of the stream.

        A client that stalls for ``LINE_TIMEOUT`` seconds mid-stream gets ``FsError``
        (ETIMEDOUT); a malformed line, EINVAL."""
        while True:
            try:
                with trio.fail_after(LINE_TIMEOUT):
                    line = await self.line()
                if not line.strip():
                    return
                yield decode(line)
            except trio.TooSlowError:
                raise FsError("the client stopped sending", errno=errno.ETIMEDOUT) from None
            except ValueError as e:
                raise FsError(f"bad request line: {e}", errno=errno.EINVAL) from None


def _peer(stream: trio.SocketStream) -> dict[str, int]:
    """The connecting process's pid, uid and gid, as the kernel saw them at connect."""
    creds = stream.socket.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", creds)
    return {"pid": pid, "uid": uid, "gid": gid}


async def _send_quietly(stream: trio.SocketStream, message: Message) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(encode(message))
