"""Hostile requests on a mount's control socket: an error line, never a dead server.

Each example connects to a real ControlServer and sends one frame: JSON of any
shape (unknown ops, wrong types, NUL, huge numbers), bytes that are not JSON or
not UTF-8, nesting deep enough to exhaust the parser's recursion, a line past
``MAX_LINE``. The answer ends with one final line (``done`` or ``error`` with an
errno), and the server still answers the next client.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cloudfs.lib.jsonlines import MAX_LINE
from tests.fuzz.control import exchange, running_control_server
from tests.fuzz.strategies import FUZZ, TEXT, edge_ints

JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | edge_ints(-(2**70), 2**70) | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
OPS = st.one_of(st.sampled_from(["echo", "inodes", "lines", "", "nope", "__class__"]), JSON)


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("control") / "m.sock"
    with running_control_server(path):
        yield path


def check(path: Path, payload: bytes) -> dict[str, Any]:
    replies = exchange(path, payload)
    assert replies, "no answer"
    final = replies[-1]
    assert final.get("done") is True or (
        isinstance(final.get("error"), str) and isinstance(final.get("errno"), int)
    ), final
    if "errno" in final:
        assert final["errno"] != errno.EIO, f"a handler broke: {final}"
    assert exchange(path, b'{"op":"echo","value":1}\n')[-1] == {"done": True, "echo": 1}
    return final  # type: ignore[no-any-return]


@FUZZ
@given(
    request=st.fixed_dictionaries({"op": OPS}, optional={"value": JSON, "inodes": JSON}),
    more=st.lists(JSON, max_size=3),
)
def test_json_requests(control: Path, request: dict[str, Any], more: list[Any]) -> None:
    payload = json.dumps(request).encode() + b"\n"
    payload += b"".join(json.dumps(m).encode() + b"\n" for m in more)
    check(control, payload)


@FUZZ
@given(payload=st.binary(max_size=300))
@example(payload=b"[" * 100_000 + b"\n")  # deeper than json's recursion
@example(payload=b'{"op": "echo", "value": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
@example(payload=b'{"op":"lines"}\n' + b"{" * 50_000 + b"\n")
@example(payload=b"\xff\xfe\n")
@example(payload=b'{"op": "echo"}')  # no newline, then the end
@example(payload=b"")
@example(payload=b'["op"]\n')
@example(payload=b'{"op": "inodes", "inodes": [1e400]}\n')
def test_raw_frames(control: Path, payload: bytes) -> None:
    check(control, payload)


def test_a_line_past_the_limit_is_refused(control: Path) -> None:
    final = check(control, b"x" * (MAX_LINE + 1))
    assert final["errno"] == errno.EINVAL and "too long" in final["error"]
