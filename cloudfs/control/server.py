"""ControlServer: serves control requests inside the mount's trio loop.

Handlers are async callables ``handler(request, emit) -> result``: ``emit``
sends a progress event, the returned dict is the final ``done`` line, and an
``FsError`` becomes the final ``error`` line with its errno. A client that goes
away cancels its handler. Anything else a handler raises is a bug: logged with
its traceback, answered with EIO.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from cloudfs.control.protocol import MAX_LINE, Message, decode, encode
from cloudfs.errors import FsError

log = logging.getLogger(__name__)

Emit = Callable[[Message], Awaitable[None]]
Handler = Callable[[Message, Emit], Awaitable[Message]]


class ControlServer:
    def __init__(self, path: Path, handlers: dict[str, Handler]) -> None:
        self._path = path
        self._handlers = handlers

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
        async with stream:
            try:
                request = decode(await _read_line(stream))
            except (ValueError, trio.BrokenResourceError, trio.ClosedResourceError) as e:
                await _send_quietly(stream, {"error": f"bad request: {e}", "errno": errno.EINVAL})
                return

            async def emit(event: Message) -> None:
                await stream.send_all(encode(event))

            try:
                final = await self._dispatch(request, emit)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the client went away
            await _send_quietly(stream, final)

    async def _dispatch(self, request: Message, emit: Emit) -> Message:
        handler = self._handlers.get(str(request.get("op")))
        if handler is None:
            return {"error": f"unknown operation {request.get('op')!r}", "errno": errno.EINVAL}
        try:
            result = await handler(request, emit)
        except FsError as e:
            return {"error": str(e), "errno": e.errno}
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise
        except Exception:
            log.exception("control operation %r failed", request.get("op"))
            return {"error": "internal error (see the mount's log)", "errno": errno.EIO}
        return {"done": True, **result}


async def _read_line(stream: trio.SocketStream) -> bytes:
    buf = bytearray()
    with trio.fail_after(30):
        while b"\n" not in buf:
            chunk = await stream.receive_some(65536)
            if not chunk:
                break
            buf += chunk
            if len(buf) > MAX_LINE:
                raise ValueError("request too long")
    return bytes(buf.split(b"\n", 1)[0])


async def _send_quietly(stream: trio.SocketStream, message: Message) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(encode(message))
