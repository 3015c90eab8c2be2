"""``cloudfs cache serve`` as a process, over moto behind a counting proxy, asked over HTTP.

What reaches the object store is counted at the proxy, not by our metrics.
"""

from __future__ import annotations

import errno
import http.client
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import pytest

from cloudfs.cache.interface import BlockAsk
from cloudfs.data.blocks import ObjectRef, block_key
from cloudfs.metrics import Metrics
from cloudfs.peers import wire
from cloudfs.peers.client import PeerGroup
from cloudfs.peers.health import MemberHealth
from cloudfs.peers.ring import Ring
from cloudfs.ufs.factory import store_id
from testkit.cache_workers import CacheWorker, running_cache_worker
from testkit.faults_proxy import FaultsProxy, running_proxy
from testkit.servers import S3Server, free_port

KiB = 1024
BS = 64 * KiB
TOKEN = "s3cr3t-token"


@dataclass
class World:
    s3: S3Server
    bucket: str
    proxy: FaultsProxy
    worker: CacheWorker

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}"

    def put(self, key: str, data: bytes) -> str:
        """Write ``key`` straight into S3 (not through the proxy); its ETag."""
        etag: str = self.s3.client().put_object(Bucket=self.bucket, Key=key, Body=data)["ETag"]
        return etag.strip('"')

    def body_gets(self) -> int:
        return sum(1 for m, t in self.proxy.requests if m == "GET" and "list-type" not in t)


def _worker_options(proxy: FaultsProxy) -> list[str]:
    return ["--s3-endpoint", proxy.endpoint, "--cache-size", "64M", "--memory-cache-size", "8M"]


@pytest.fixture
def world(s3_server: S3Server, s3_bucket: str) -> Iterator[World]:
    with (
        running_proxy(s3_server.endpoint) as proxy,
        running_cache_worker(s3_server.env(), options=_worker_options(proxy)) as worker,
    ):
        yield World(s3_server, s3_bucket, proxy, worker)


@dataclass(frozen=True)
class Answer:
    status: int
    data: bytes
    source: str | None
    errno: int | None  # X-Cloudfs-Errno


def call(address: str, target: str, headers: dict[str, str] | None = None) -> Answer:
    """One GET on a fresh connection, as any HTTP client would send it."""
    host, _, port = address.rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", target, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
        number = response.getheader(wire.ERRNO_HEADER)
        if response.status == HTTPStatus.OK:
            assert response.getheader(wire.CRC_HEADER) == str(zlib.crc32(data))
        return Answer(
            response.status,
            data,
            response.getheader(wire.SOURCE_HEADER),
            None if number is None else int(number),
        )
    finally:
        conn.close()


def answer(address: str, headers: dict[str, str] | None = None, **fields: Any) -> Answer:
    return call(address, wire.Query(**fields).target(), headers)


def get_block(address: str, headers: dict[str, str] | None = None, **fields: Any) -> Answer:
    got = answer(address, headers, **fields)
    assert got.status == HTTPStatus.OK, got
    return got


def refused(address: str, **fields: Any) -> Answer:
    got = answer(address, **fields)
    assert got.status != HTTPStatus.OK, got
    return got


def ask(w: World, key: str, etag: str, size: int, index: int) -> dict[str, Any]:
    return dict(store_uri=w.uri, key=key, etag=etag, object_size=size, block_size=BS, index=index)


def test_a_cold_block_leaves_the_store_once_for_many_callers_and_stays(world: World) -> None:
    data = os.urandom(3 * BS + 100)
    etag = world.put("train/a.bin", data)
    world.proxy.reset_counts()
    fields = ask(world, "train/a.bin", etag, len(data), 1)

    with ThreadPoolExecutor(12) as pool:
        replies = list(pool.map(lambda _: get_block(world.worker.address, **fields), range(12)))
    assert all(r.data == data[BS : 2 * BS] for r in replies)
    assert world.body_gets() == 1  # one GET for twelve callers, conditional on the ETag:
    assert world.proxy.count("HEAD") == 0  # no second look at the version

    again = get_block(world.worker.address, **fields)
    assert (again.data, again.source) == (data[BS : 2 * BS], "memory")
    last = get_block(world.worker.address, **ask(world, "train/a.bin", etag, len(data), 3))
    assert last.data == data[3 * BS :] and last.source == "origin"

    world.worker.restart()  # the disk tier outlives the process
    world.proxy.reset_counts()
    warm = get_block(world.worker.address, **fields)
    assert (warm.data, warm.source) == (data[BS : 2 * BS], "disk")
    assert world.body_gets() == 0


def test_the_worker_keys_blocks_as_a_mount_with_its_settings_does(world: World) -> None:
    """Same store id, same block key: a mount's key places the block the worker stores."""
    data = os.urandom(BS)
    etag = world.put("k", data)
    get_block(world.worker.address, **ask(world, "k", etag, len(data), 0))
    salt = store_id(world.uri, world.proxy.endpoint)
    key = block_key(salt, ObjectRef("k", etag, len(data)), 0, BS)
    assert (world.worker.cache_dir / "blocks" / key[:2] / key).is_file()


def test_errors_are_http_statuses_with_the_errno(world: World) -> None:
    data = os.urandom(2 * BS)
    etag = world.put("d/x", data)
    address = world.worker.address
    cases = [
        (ask(world, "d/missing", etag, len(data), 0), HTTPStatus.NOT_FOUND, errno.ENOENT),
        (
            ask(world, "d/x", "0" * 32, len(data), 0),
            HTTPStatus.PRECONDITION_FAILED, errno.ESTALE,
        ),
        (  # the right version, not of the size the caller says: its last block is short
            ask(world, "d/x", etag, len(data) + 1, 2),
            HTTPStatus.PRECONDITION_FAILED, errno.ESTALE,
        ),
        (ask(world, "d/x", "", len(data), 0), HTTPStatus.BAD_REQUEST, errno.EINVAL),
        (ask(world, "d/x", etag, len(data), 2), HTTPStatus.BAD_REQUEST, errno.EINVAL),
        (
            {**ask(world, "d/x", etag, len(data), 0), "block_size": 1000},
            HTTPStatus.BAD_REQUEST, errno.EINVAL,
        ),
        (
            {**ask(world, "d/x", etag, len(data), 0), "store_uri": "ftp://nope"},
            HTTPStatus.BAD_REQUEST, errno.EINVAL,
        ),
        (
            {**ask(world, "etc/hostname", "x", 10, 0), "store_uri": "file:///"},
            HTTPStatus.FORBIDDEN, errno.EACCES,
        ),
    ]  # fmt: skip
    for fields, code, number in cases:
        got = refused(address, **fields)
        assert (got.status, got.errno) == (code, number), fields
    # The object store failing is 503, with EIO: the worker itself answered.
    world.proxy.mode = "refuse"
    got = refused(address, **ask(world, "d/x", etag, len(data), 0))
    assert (got.status, got.errno) == (HTTPStatus.SERVICE_UNAVAILABLE, errno.EIO)
    world.proxy.mode = "forward"
    assert get_block(address, **ask(world, "d/x", etag, len(data), 0)).data == data[:BS]


def test_a_changed_object_is_never_cached_under_its_old_version(world: World) -> None:
    old = os.urandom(2 * BS)
    etag = world.put("v", old)
    assert get_block(world.worker.address, **ask(world, "v", etag, len(old), 0)).data == old[:BS]
    new = os.urandom(2 * BS)
    new_etag = world.put("v", new)
    # Block 1 of the old version was never fetched: the store now has other bytes.
    got = refused(world.worker.address, **ask(world, "v", etag, len(old), 1))
    assert (got.status, got.errno) == (HTTPStatus.PRECONDITION_FAILED, errno.ESTALE)
    reply = get_block(world.worker.address, **ask(world, "v", new_etag, len(new), 0))
    assert (reply.data, reply.source) == (new[:BS], "origin")
    assert (
        get_block(world.worker.address, **ask(world, "v", new_etag, len(new), 1)).data == (new[BS:])
    )


def test_a_worker_with_a_token_refuses_callers_without_it(
    s3_server: S3Server, s3_bucket: str
) -> None:
    with (
        running_proxy(s3_server.endpoint) as proxy,
        running_cache_worker(
            s3_server.env(), token=TOKEN, options=_worker_options(proxy)
        ) as worker,
    ):
        w = World(s3_server, s3_bucket, proxy, worker)
        data = os.urandom(BS)
        etag = w.put("t", data)
        fields = ask(w, "t", etag, len(data), 0)
        for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}]:
            got = answer(worker.address, headers, **fields)
            assert got.status == HTTPStatus.UNAUTHORIZED
            assert got.errno is None  # not the block's fault: the caller backs off
        assert proxy.count() == 0  # refused before anything reached the store
        right = {"Authorization": f"Bearer {TOKEN}"}
        assert get_block(worker.address, right, **fields).data == data


def test_peer_group_reads_through_live_members_and_backs_off_a_dead_one(world: World) -> None:
    data = os.urandom(8 * BS)
    etag = world.put("big", data)
    dead = f"127.0.0.1:{free_port()}"
    ring = Ring([world.worker.address, dead])
    # Placement keys: the first block is the dead member's, the rest anyone's.
    keys = [next(f"k{n}" for n in range(1000) if ring.owner(f"k{n}") == dead)]
    keys += [f"other-{index}" for index in range(1, 8)]
    metrics = Metrics()
    health = MemberHealth(first=60.0, longest=60.0)  # no probe within this test
    group = PeerGroup([world.worker.address, dead], world.uri, metrics, health=health)
    try:
        got = [
            group.fetch([BlockAsk("big", etag, len(data), BS, index, keys[index], BS)])[0]
            for index in range(8)
        ]
    finally:
        group.close()
    assert got[0] is None  # the dead member's one failed call: the caller reads the UFS
    assert got[1:] == [data[i * BS : (i + 1) * BS] for i in range(1, 8)]  # then runners-up
    sample = metrics.registry.get_sample_value
    assert sample("cloudfs_peer_backoffs_total", {"member": dead}) == 1
    assert sample("cloudfs_peer_requests_total", {"member": dead, "result": "error"}) == 1
    assert (
        sample("cloudfs_peer_requests_total", {"member": world.worker.address, "result": "miss"})
        == 7
    )
    assert sample("cloudfs_peer_bytes_total", {"member": world.worker.address}) == 7 * BS


def test_peer_group_refuses_a_short_block(world: World) -> None:
    data = os.urandom(BS)
    etag = world.put("s", data)
    metrics = Metrics()
    group = PeerGroup([world.worker.address], world.uri, metrics)
    try:
        wrong_length = BlockAsk("s", etag, len(data), BS, 0, "k", BS - 1)
        assert group.fetch([wrong_length]) == [None]
    finally:
        group.close()
    sample = metrics.registry.get_sample_value
    assert (
        sample("cloudfs_peer_requests_total", {"member": world.worker.address, "result": "error"})
        == 1
    )


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "cache", "serve", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["--listen", "nowhere", "--no-token"], 2, "--listen wants HOST:PORT, not 'nowhere'"),
        (["--listen", "0.0.0.0:0", "--no-token"], 2, "--token-file is required"),
        (["--no-token", "--cache-size", "lots"], 2, "invalid size 'lots'"),
        (["--no-token", "--threads", "0"], 2, "--threads wants a positive number"),
        (["--no-token", "--token-file", "/nonexistent/token"], 2, "cannot read token file"),
    ],
)
def test_bad_flags_are_one_line_and_a_nonzero_exit(
    tmp_path: Any, args: list[str], status: int, message: str
) -> None:
    result = _serve("--cache-dir", str(tmp_path / "c"), *args)
    assert result.returncode == status
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_cache_dir_it_cannot_create_is_one_line(tmp_path: Any) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = _serve("--cache-dir", str(blocker / "cache"), "--no-token")
    assert result.returncode == 1
    assert result.stderr.startswith(f"cloudfs: cannot use cache directory {blocker / 'cache'}")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_port_in_use_is_one_line(tmp_path: Any, world: World) -> None:
    result = _serve(
        "--cache-dir", str(tmp_path / "c"), "--no-token", "--listen", world.worker.address
    )
    assert result.returncode == 1
    assert "cannot listen on" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
