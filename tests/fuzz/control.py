"""A real ControlServer in a background trio thread, and a raw client for it."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trio

from cloudfs.control.protocol import inodes_of
from cloudfs.control.server import ClientLines, ControlServer, Emit
from cloudfs.lib.jsonlines import Message


async def echo(request: Message, emit: Emit) -> Message:
    return {"echo": request.get("value")}


async def inodes(request: Message, emit: Emit) -> Message:
    return {"count": len(inodes_of(request))}


async def lines(request: Message, reader: ClientLines, emit: Emit) -> Message:
    count = 0
    async for message in reader.messages():
        inodes_of(message)
        count += 1
    return {"count": count}


@contextmanager
def running_control_server(path: Path) -> Iterator[None]:
    """Serve ``echo``, ``inodes`` and the streaming ``lines`` on ``path`` until the block ends."""
    server = ControlServer(path, {"echo": echo, "inodes": inodes}, stream_handlers={"lines": lines})
    sock = server.bind()
    stop = threading.Event()
    crashed: list[BaseException] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.serve, sock)
            await trio.to_thread.run_sync(stop.wait)
            nursery.cancel_scope.cancel()

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as e:  # the test sees it below
            crashed.append(e)
            logging.getLogger(__name__).exception("control server crashed")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
        assert not crashed, f"the control server crashed: {crashed[0]!r}"
    finally:
        stop.set()
        thread.join(10)


def exchange(path: Path, payload: bytes, timeout: float = 10) -> list[Any]:
    """Send ``payload`` and close our side; the JSON lines the server answered."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before reading it all
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return [json.loads(line) for line in data.splitlines()]
