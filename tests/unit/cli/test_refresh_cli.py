"""``cloudfs refresh -r`` on the command line: what it sends, and how failures are told."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudfs.cli.main import main
from cloudfs.control import client
from cloudfs.lib.jsonlines import Message


def test_failed_directories_are_named_and_the_exit_status_is_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file.txt").write_text("x")
    sent: list[Message] = []

    def call(mountpoint: str, request: Message, *, timeout: float) -> Iterator[Message]:
        sent.append(request)
        if not request.get("recursive"):
            yield {"done": True, "directories": 1, "changes": 0}
            return
        yield {"root": 0, "path": "", "found": 2, "changes": 1}
        yield {"root": 0, "path": "d1", "failed": "LIST d1: the store is down", "errno": 5}
        yield {"root": 0, "path": "e", "found": 0, "changes": 2}
        yield {"done": True, "directories": 2, "changes": 3, "failed": 1}

    monkeypatch.setattr(client, "mountpoint_of", lambda path: "/mnt/x")
    monkeypatch.setattr(client, "call", call)
    status = main(["refresh", "-r", "-p", "3", str(tmp_path), str(tmp_path / "file.txt")])
    out, err = capsys.readouterr()
    assert status == 1
    assert out == "refreshed 3 directories: 3 changes, 1 failed\n"
    assert err.splitlines()[-1] == (
        f"cloudfs: cannot refresh {tmp_path}/d1: LIST d1: the store is down"
    )
    directory = tmp_path.stat().st_ino
    assert sent == [  # the file: its directory, not recursively
        {"op": "refresh", "inodes": [directory]},
        {"op": "refresh", "inodes": [directory], "recursive": True, "parallel": 3},
    ]
