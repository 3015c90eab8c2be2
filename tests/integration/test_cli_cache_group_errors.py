"""``cloudfs mount`` with cache-group flags it cannot use: one line, a nonzero exit, and
nothing started (these fail while the flags are read, before any mount)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "cloudfs.cli.main", "mount"]
TREE = "grpc://127.0.0.1:1/vol"


@pytest.mark.parametrize(
    ("uri", "flags", "message"),
    [
        ("file:///tmp", ["--cache-group", "g"], "--cache-group needs a grpc://"),
        ("file:///tmp", ["-o", "cache_group=g"], "--cache-group needs a grpc://"),
        (TREE, ["--cache-group", "g", "--cache-peers", "h:1"], "not both"),
        (TREE, ["--cache-group", "bad/name"], "bad cache group name"),
        (TREE, ["--cache-group-serve", "127.0.0.1:7080"], "needs --cache-group or"),
        (
            TREE,
            ["--cache-group", "g", "--cache-group-serve", "0.0.0.0:7080"],
            "not 0.0.0.0",
        ),
        (
            TREE,
            ["-o", "cache_group=g,cache_group_serve=127.0.0.1:0"],
            "not 0.0.0.0 or [::]) and a port (not 0)",
        ),
        (TREE, ["--cache-group", "g", "--cache-group-serve", "h"], "wants HOST:PORT"),
        (
            TREE,
            ["--cache-group", "g", "--cache-group-serve", "10.0.0.1:7080"],
            "needs --cache-token-file",
        ),
    ],
)
def test_bad_cache_group_flags_are_one_line(
    tmp_path: Path, uri: str, flags: list[str], message: str
) -> None:
    done = subprocess.run(
        [*CLI, uri, str(tmp_path), "--cache-dir", str(tmp_path / "cache"), *flags],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "CLOUDFS_CACHE_TOKEN"},
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cloudfs:"), done.stderr
    assert message in lines[0], lines[0]
    assert not (tmp_path / "cache").exists()
