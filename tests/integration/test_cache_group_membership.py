"""Cache-group membership through real processes: ``cloudfs meta serve`` (LMDB, and two
servers over one etcd) and ``cloudfs cache serve --group`` workers joining it.

What is checked is what the tree service lists (``GroupClient``, the mounts'
own client): joins, a killed worker's expiry, a restarted worker's return, a
clean leave on SIGTERM, the token, and the errors for bad input.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cloudfs.errors import AccessDenied, FsError, InvalidArgument
from cloudfs.meta.client.groups import GroupClient
from testkit.cache_workers import running_cache_worker
from testkit.etcd import EtcdCluster
from testkit.tree_server import TreeServer, running_tree_server

CLI = [sys.executable, "-m", "cloudfs.cli.main"]
HEARTBEAT = 0.5  # seconds; a member is listed for three of them
TOKEN = "tree-token"


def wait_for(check: Callable[[], bool], timeout: float = 15.0) -> float:
    """Seconds until ``check()`` held; fails after ``timeout``."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, "timed out"
        time.sleep(0.1)
    return time.monotonic() - start


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreeServer]:
    with running_tree_server(token=TOKEN) as server:
        yield server


@pytest.fixture
def client(tree: TreeServer) -> Iterator[GroupClient]:
    c = GroupClient(tree.address, token=TOKEN)
    yield c
    c.close()


def worker_options(tree: TreeServer, group: str, tmp: Path) -> list[str]:
    token_file = tmp / "meta-token"
    token_file.write_text(TOKEN)
    return [
        "--group", group, "--meta", f"grpc://{tree.address}",
        "--meta-token-file", str(token_file), "--heartbeat", str(HEARTBEAT),
    ]  # fmt: skip


def test_workers_join_expire_when_killed_and_rejoin_when_restarted(
    tree: TreeServer, client: GroupClient, tmp_path: Path
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    options = worker_options(tree, group, tmp_path)
    with (
        running_cache_worker({**os.environ}, options=options) as a,
        running_cache_worker({**os.environ}, options=options) as b,
    ):
        wait_for(lambda: client.members(group) == tuple(sorted([a.address, b.address])))
        a.kill()  # no leave: its record has to expire
        took = wait_for(lambda: client.members(group) == (b.address,))
        assert took <= 3 * HEARTBEAT + 2.0, took
        a.restart()  # same address and cache: it joins again
        wait_for(lambda: a.address in client.members(group), timeout=3 * HEARTBEAT + 5)
        b.stop()  # SIGTERM: it leaves at once rather than after its TTL
        assert client.members(group) == (a.address,)
        assert "joining cache group" in a.log()


def test_a_worker_keeps_serving_while_the_tree_service_is_away(tmp_path: Path) -> None:
    with running_tree_server(token=TOKEN, log_path=tmp_path / "tree.log") as tree:
        group = "steady"
        client = GroupClient(tree.address, token=TOKEN)
        try:
            with running_cache_worker(
                {**os.environ}, options=worker_options(tree, group, tmp_path)
            ) as w:
                wait_for(lambda: client.members(group) == (w.address,))
                tree.kill()
                time.sleep(4 * HEARTBEAT)
                assert w.alive
                tree.restart()  # LMDB keeps the record; the heartbeats renew it
                wait_for(lambda: client.members(group) == (w.address,), timeout=20)
                log = w.log()
                assert log.count("failed, trying every") == 1, log  # once per change of state
                assert "works again" in log
        finally:
            client.close()


def test_the_token_is_required(tree: TreeServer) -> None:
    anonymous = GroupClient(tree.address)
    try:
        with pytest.raises(AccessDenied):
            anonymous.members("g")
        with pytest.raises(AccessDenied):
            anonymous.join("g", "10.0.0.1:7080", 5)
    finally:
        anonymous.close()


@pytest.mark.parametrize(
    ("group", "address"), [("", "h:1"), ("bad/name", "h:1"), ("g", "0.0.0.0:7080"), ("g", "h")]
)
def test_bad_input_is_invalid_argument_with_einval(
    client: GroupClient, group: str, address: str
) -> None:
    with pytest.raises(InvalidArgument) as e:
        client.join(group, address, 5)
    assert e.value.errno == errno.EINVAL


def test_several_servers_over_one_etcd_agree(etcd: EtcdCluster, tmp_path: Path) -> None:
    hosts = ",".join(e.removeprefix("http://") for e in etcd.endpoints)
    engine = f"etcd://{hosts}/groups-{uuid.uuid4().hex[:8]}"
    with (
        running_tree_server(engine, log_path=tmp_path / "one.log") as one,
        running_tree_server(engine, log_path=tmp_path / "two.log") as two,
    ):
        first, second = GroupClient(one.address), GroupClient(two.address)
        try:
            first.join("shared", "10.0.0.1:7080", 1.0)
            second.join("shared", "10.0.0.2:7080", 60)
            assert first.members("shared") == second.members("shared")
            assert second.members("shared") == ("10.0.0.1:7080", "10.0.0.2:7080")
            wait_for(lambda: second.members("shared") == ("10.0.0.2:7080",), timeout=5)
            second.leave("shared", "10.0.0.2:7080")
            assert first.members("shared") == ()
        finally:
            first.close()
            second.close()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--group", "g"], "--group needs --meta-server"),
        (["--meta-server", "grpc://127.0.0.1:1"], "--meta-server and --advertise go with --group"),
        (["--group", "g", "--meta-server", "nowhere"], "--meta-server wants [grpc://]HOST:PORT"),
        (["--group", "a/b", "--meta", "grpc://127.0.0.1:1"], "bad cache group name"),
        (
            ["--group", "g", "--meta", "grpc://127.0.0.1:1", "--listen", "0.0.0.0:7080"],
            "give --advertise",
        ),
        (
            ["--group", "g", "--meta", "grpc://127.0.0.1:1", "--advertise", "[::]:7080"],
            "bad cache group member",
        ),
        (
            ["--group", "g", "--meta", "grpc://127.0.0.1:1", "--heartbeat", "0.1"],
            "--heartbeat wants",
        ),
    ],
)
def test_cache_serve_bad_group_flags_are_one_line(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    done = run_cli(
        "cache", "serve", "--cache-dir", str(tmp_path / "c"), "--token-file", str(token), *flags
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cloudfs:"), done.stderr
    assert message in lines[0]


def test_errors_carry_fs_errors(client: GroupClient) -> None:
    with pytest.raises(FsError):
        client.join("g", "h:1", 500)  # below the shortest TTL
