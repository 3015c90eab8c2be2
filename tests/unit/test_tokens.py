"""TokenFile (cloudfs/tokens.py): re-read when its file changes, at most once per interval,
and at once when a token it does not know is refused; the last token kept through a swap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudfs.errors import UsageError
from cloudfs.tokens import StaticToken, TokenFile, accepts, token_source


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def swap(path: Path, token: str) -> None:
    new = path.with_name(path.name + ".new")
    new.write_text(token)
    os.replace(new, path)


def test_a_changed_file_is_read_again_after_the_interval(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one\n")
    clock = Clock()
    token = TokenFile(str(path), check_seconds=1.0, clock=clock)
    assert token.current() == "one"
    swap(path, "two")
    assert token.current() == "one"  # not looked at again within the second
    clock.now += 1.0
    assert token.current() == "two"


def test_a_file_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one")
    token = TokenFile(str(path), check_seconds=0.0)
    path.write_text("three")  # same inode, another size
    assert token.current() == "three"


def test_a_server_accepts_a_rotated_token_at_once_and_the_old_one_after_a_look(
    tmp_path: Path,
) -> None:
    path = tmp_path / "token"
    path.write_text("old")
    clock = Clock()
    token = TokenFile(str(path), check_seconds=1.0, clock=clock)
    swap(path, "new")
    assert accepts(token, "Bearer old")  # not looked at yet
    assert accepts(token, "Bearer new")  # refused first, so the file was looked at
    assert not accepts(token, "Bearer old")
    assert not accepts(token, None)


def test_a_vanished_or_empty_file_keeps_the_last_token(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("kept")
    token = TokenFile(str(path), check_seconds=0.0)
    path.unlink()
    assert token.current() == "kept"
    path.write_text("  \n")
    assert token.current() == "kept"
    path.write_text("next")
    assert token.current() == "next"


@pytest.mark.parametrize("content", [None, "", "\n"])
def test_an_unreadable_or_empty_file_at_start_is_a_usage_error(
    tmp_path: Path, content: str | None
) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match="token file"):
        TokenFile(str(path))


def test_sources() -> None:
    assert token_source(None) is None
    assert token_source("") is None
    source = token_source("fixed")
    assert isinstance(source, StaticToken) and source.current() == "fixed"
    assert not source.refresh()
    assert accepts(None, None)
