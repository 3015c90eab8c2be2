"""The control channel: a real UNIX socket between ControlServer (trio) and the sync client."""

from __future__ import annotations

import errno
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from cloudfs.control import client
from cloudfs.control.server import ControlServer, Emit
from cloudfs.errors import FsError, NotFound
from cloudfs.lib.jsonlines import Message


async def echo(request: Message, emit: Emit) -> Message:
    for i in range(int(request.get("events", 0))):
        await emit({"event": i})
    return {"echo": request.get("value")}


async def missing(request: Message, emit: Emit) -> Message:
    raise NotFound("no such thing")


async def broken(request: Message, emit: Emit) -> Message:
    raise RuntimeError("a bug")


def serving(path: Path, check: Callable[[], None]) -> None:
    """Run the server in trio while ``check`` talks to it from a thread."""
    server = ControlServer(path, {"echo": echo, "missing": missing, "broken": broken})
    sock = server.bind()
    failure: list[BaseException] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.serve, sock)

            def run_check() -> None:
                try:
                    check()
                except BaseException as e:  # reported below, in the test's thread
                    failure.append(e)

            await trio.to_thread.run_sync(run_check)
            nursery.cancel_scope.cancel()

    trio.run(main)
    if failure:
        raise failure[0]
    assert not path.exists(), "the socket file is removed when serving stops"


def test_events_then_result_and_owner_only_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.sock"
    monkeypatch.setattr(client.paths, "control_socket", lambda mountpoint: path)

    def check() -> None:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        messages = list(client.call("/mnt", {"op": "echo", "events": 3, "value": "x"}, timeout=5))
        assert messages == [{"event": 0}, {"event": 1}, {"event": 2}, {"done": True, "echo": "x"}]
        assert client.result("/mnt", {"op": "echo", "value": 7}) == {"done": True, "echo": 7}

    serving(path, check)


def test_errors_carry_their_errno(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.sock"
    monkeypatch.setattr(client.paths, "control_socket", lambda mountpoint: path)

    def check() -> None:
        for request, code in [
            ({"op": "missing"}, errno.ENOENT),
            ({"op": "nope"}, errno.EINVAL),
            ({"op": "broken"}, errno.EIO),
        ]:
            with pytest.raises(FsError) as info:
                client.result("/mnt", request)
            assert info.value.errno == code, request
        with socket.socket(socket.AF_UNIX) as raw:  # not JSON at all
            raw.connect(str(path))
            raw.sendall(b"hello\n")
            answer = raw.makefile("rb").readline()
        assert b'"errno":22' in answer

    serving(path, check)


def test_no_server_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client.paths, "control_socket", lambda mountpoint: tmp_path / "none")
    with pytest.raises(client.StartupError, match="does not answer"):
        client.result("/mnt", {"op": "echo"})


def test_a_silent_server_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "silent.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)
    monkeypatch.setattr(client.paths, "control_socket", lambda mountpoint: path)
    try:
        with pytest.raises(client.StartupError, match="no answer within"):
            client.result("/mnt", {"op": "echo"}, timeout=0.3)
    finally:
        listener.close()
