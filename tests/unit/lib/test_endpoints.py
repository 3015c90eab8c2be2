"""HOST:PORT on the command line: one helper, one-line errors."""

from __future__ import annotations

import pytest

from cloudfs.errors import UsageError
from cloudfs.lib.endpoints import parse_host_port, parse_members


def test_host_port() -> None:
    assert parse_host_port("10.0.0.5:7080", "--listen") == ("10.0.0.5", 7080)
    assert parse_host_port("[::1]:0", "--listen") == ("[::1]", 0)
    assert parse_host_port(":9100", "--metrics", default_host="127.0.0.1") == ("127.0.0.1", 9100)


@pytest.mark.parametrize("bad", ["", "host", "host:", ":7080", "host:http", "host:70000"])
def test_bad_host_port_names_the_flag(bad: str) -> None:
    with pytest.raises(UsageError, match="--listen wants HOST:PORT"):
        parse_host_port(bad, "--listen")


def test_members() -> None:
    assert parse_members("a:1,b:2+c:3, a:1", "--cache-peers") == ("a:1", "b:2", "c:3")
    with pytest.raises(UsageError, match="--cache-peers"):
        parse_members("a:1,b", "--cache-peers")
    with pytest.raises(UsageError, match="no port"):
        parse_members("a:0", "--cache-peers")
    with pytest.raises(UsageError, match="--cache-peers"):
        parse_members(",", "--cache-peers")
