"""The CLI's parsers on any text: a value or ``UsageError``, never another exception.

And a few real ``python3 -m cloudfs.cli.main`` runs with bad arguments: a
nonzero exit, one line naming the trouble, no traceback.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cloudfs.cli import mount_options
from cloudfs.cli.main import build_parser
from cloudfs.cli.meta_serve import count_flag, is_loopback
from cloudfs.cli.mount import config_from_args
from cloudfs.errors import UsageError
from cloudfs.lib.endpoints import parse_host_port, parse_members
from cloudfs.sizes import parse_mode, parse_seconds, parse_size
from tests.fuzz.strategies import FUZZ

ROOT = Path(__file__).resolve().parents[2]
# Text as people and scripts mistype it: digits of other scripts, signs, exponents, units.
WORDS = st.one_of(
    st.text(max_size=30),
    st.text(alphabet="0123456789.:,+-eEkKmMgGtTiIbB []_xo%\u00b2\u0663\uff11\x00", max_size=30),
    st.sampled_from(["9" * 400, "1e400", "nan", "inf", "-0", "0x10", "1_000", "[::1]:80", ":"]),
)


def value_or_usage_error(parse: Callable[[str], Any], text: str) -> Any:
    try:
        return parse(text)
    except UsageError as e:
        assert str(e) and "\n" not in str(e)
        return None


@FUZZ
@given(text=WORDS)
@example(text="9" * 400)  # past a float: int(float(...)) overflowed
@example(text="1e400")
def test_sizes(text: str) -> None:
    size = value_or_usage_error(parse_size, text)
    assert size is None or (isinstance(size, int) and size >= 0)


@FUZZ
@given(text=WORDS)
@example(text="nan")
@example(text="inf")
def test_durations(text: str) -> None:
    seconds = value_or_usage_error(parse_seconds, text)
    assert seconds is None or (math.isfinite(seconds) and seconds >= 0)


@FUZZ
@given(text=WORDS)
def test_modes(text: str) -> None:
    mode = value_or_usage_error(parse_mode, text)
    assert mode is None or 0 <= mode <= 0o7777


@FUZZ
@given(text=WORDS)
@example(text="host:\u00b2")  # a superscript digit: str.isdigit() says yes, int() says no
def test_host_port(text: str) -> None:
    parsed = value_or_usage_error(lambda t: parse_host_port(t, "--listen"), text)
    assert parsed is None or 0 <= parsed[1] <= 65535
    value_or_usage_error(lambda t: parse_members(t, "--cache-peers"), text)
    is_loopback(text)


@FUZZ
@given(text=WORDS)
def test_counts(text: str) -> None:
    count = value_or_usage_error(lambda t: count_flag("--threads", t), text)
    assert count is None or count >= 0


OPTION_NAMES = st.sampled_from([*sorted(mount_options.O_OPTIONS), "ro", "x-foo", "nope", ""])


@FUZZ
@given(
    options=st.lists(
        st.tuples(OPTION_NAMES, st.one_of(st.none(), WORDS)).map(
            lambda nv: nv[0] if nv[1] is None else f"{nv[0]}={nv[1]}"
        ),
        max_size=4,
    )
)
def test_mount_options(tmp_path_factory: pytest.TempPathFactory, options: list[str]) -> None:
    args = build_parser().parse_args(
        ["mount", "file:///tmp", "/mnt", "--cache-dir", "/tmp/c", "-o", ",".join(options)]
    )
    value_or_usage_error(lambda _: config_from_args(args), "")


BAD_RUNS = [
    ["mount", "s3://bucket", "/mnt", "-o", "block_size=lots"],
    ["mount", "s3://bucket", "/mnt", "-o", "no_such_option"],
    ["mount", "s3://bucket", "/mnt", "--meta-ttl", "nan"],
    ["meta", "serve", "--engine", "lmdb:///tmp/x", "--no-token", "--max-calls-per-client", "-1"],
    ["meta", "serve", "--engine", "lmdb:///tmp/x", "--no-token", "--threads", "\u00b2"],
    ["meta", "serve", "--engine", "nope://x", "--no-token"],
    ["cache", "serve", "--cache-dir", "c", "--listen", "127.0.0.1:\u00b2", "--no-token"],
    ["cache", "serve", "--cache-dir", "c", "--no-token", "--max-connections-per-client", "x"],
    ["cache", "serve", "--no-token"],  # argparse's own: its usage, then one error line
]


@pytest.mark.parametrize("argv", BAD_RUNS, ids=lambda a: " ".join(a)[:50])
def test_bad_arguments_get_one_line_and_no_traceback(argv: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", *argv],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    *usage, last = done.stderr.strip().splitlines()
    assert last.startswith("cloudfs") and "error" in last, done.stderr
    assert not usage or usage[0].startswith("usage:"), done.stderr
