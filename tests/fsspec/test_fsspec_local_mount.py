"""``cloudfs://`` reads through a running mount of the volume on the same node: a
``grpc://`` volume in a bucket of the test S3 server, a real FUSE mount of it (which
serves its blocks on a UNIX socket, ``mount/local_blocks.py``), and fsspec filesystem
objects that count their own object-store requests (``fs.metrics``). The mount's
counters come from its ``--metrics`` endpoint."""

from __future__ import annotations

import errno
import hashlib
import itertools
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from cloudfs.control import paths
from cloudfs.fsspec import CloudFileSystem
from cloudfs.meta.client.tree_uri import parse_tree_uri
from cloudfs.metrics import Metrics
from cloudfs.mount import runtime
from testkit.mounts import Backing, Mount, mounted
from testkit.prometheus import scrape
from testkit.servers import S3Server, free_port
from testkit.tree_server import TreeServer

pytestmark = pytest.mark.slow

MiB = 1024 * 1024
_buckets = itertools.count()


@dataclass
class Node:
    """The volume, its mount, and a way to make fsspec filesystems of this node."""

    tree: TreeServer
    s3: S3Server
    name: str  # the volume
    uri: str  # grpc://HOST:PORT/NAME
    mount: Mount
    metrics_address: str

    def fs(self, **options: Any) -> CloudFileSystem:
        """A filesystem object of its own (a process of its own, as far as caches go)."""
        return CloudFileSystem(
            meta_server=self.tree.address,
            s3_endpoint=self.s3.endpoint,
            skip_instance_cache=True,
            metrics=Metrics(),
            **options,
        )

    def served(self, source: str | None = None) -> float:
        """Blocks the mount served on its block socket (from ``source``, else any)."""
        labels = {"source": source} if source else {}
        return scrape(self.metrics_address).total("cloudfs_worker_blocks_total", **labels)

    def sockets(self) -> list[str]:
        salt = parse_tree_uri(self.uri).cache_id
        return [str(p) for p in paths.local_blocks_sockets(salt)]


def gets(fs: CloudFileSystem) -> float:
    return fs.metrics.registry.get_sample_value("cloudfs_ufs_requests_total", {"op": "get"}) or 0.0


def mount_hits(fs: CloudFileSystem) -> float:
    sample = fs.metrics.registry.get_sample_value
    return (sample("cloudfs_blockcache_hits_total", {"tier": "mount"}) or 0.0) + (
        sample("cloudfs_blockcache_misses_total", {"tier": "mount"}) or 0.0
    )


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("not seen in time")
        time.sleep(0.05)


@contextmanager
def node_mount(
    tree: TreeServer, s3_server: S3Server, options: list[str] | None = None
) -> Iterator[Node]:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("FUSE tests need /dev/fuse and root")
    bucket = f"fsspec-local-{os.getpid()}-{next(_buckets)}"
    s3_server.client().create_bucket(Bucket=bucket)
    uri = tree.new_volume(f"s3://{bucket}/data")
    address = f"127.0.0.1:{free_port()}"
    backing = Backing(uri=uri, s3=s3_server, bucket=bucket)
    with mounted(backing, ["--metrics", address, *(options or [])]) as m:
        yield Node(tree, s3_server, uri.rsplit("/", 1)[1], uri, m, address)


@pytest.fixture
def node(tree: TreeServer, s3_server: S3Server, aws_env: None) -> Iterator[Node]:
    with node_mount(tree, s3_server) as n:
        yield n


def put(node: Node, path: str, data: bytes) -> None:
    """Write through fsspec (write-through), and wait until the mount sees it."""
    fs = node.fs(local_mount=False)
    try:
        fs.pipe_file(f"{node.name}/{path}", data)
    finally:
        fs.close()
    eventually(lambda: (node.mount.root / path).exists())


def test_a_file_the_mount_read_costs_fsspec_no_get(node: Node) -> None:
    data = os.urandom(9 * MiB + 5)  # three 4 MiB blocks
    put(node, "warm.bin", data)
    assert (node.mount.root / "warm.bin").read_bytes() == data  # now in the mount's cache
    assert len(node.sockets()) == 1
    before = node.served("memory")
    fs = node.fs()
    try:
        assert fs.cat_file(f"{node.name}/warm.bin") == data
        assert (
            fs.cat_file(f"{node.name}/warm.bin", start=5 * MiB, end=5 * MiB + 10)
            == (data[5 * MiB : 5 * MiB + 10])
        )
        assert gets(fs) == 0
        assert mount_hits(fs) == 3  # the range's block again: from the client's window
        assert node.served("memory") - before == 3  # the mount's counters show the hits
    finally:
        fs.close()


def test_a_cold_file_read_through_fsspec_is_the_next_process_s_warm_one(node: Node) -> None:
    data = os.urandom(6 * MiB)
    put(node, "cold.bin", data)
    first, second = node.fs(), node.fs()
    try:
        assert first.cat_file(f"{node.name}/cold.bin") == data
        assert gets(first) == 0  # the mount fetched it, into its own cache
        assert node.served("origin") == 2
        assert second.cat_file(f"{node.name}/cold.bin") == data
        assert gets(second) == 0
        assert node.served("memory") == 2
        assert (node.mount.root / "cold.bin").read_bytes() == data  # the mount's own reads too
    finally:
        first.close()
        second.close()


def _child_reads(fs: CloudFileSystem, files: dict[str, bytes], out: Any) -> None:
    """In a forked worker: read every file; report what was right and the GETs sent."""
    ok = all(fs.cat_file(path) == data for path, data in files.items())
    out.put((os.getpid(), ok, gets(fs), mount_hits(fs)))


def test_forked_workers_read_through_the_mount(node: Node) -> None:
    files = {f"{node.name}/train/{i}.bin": os.urandom(MiB + i) for i in range(8)}
    for path, data in files.items():
        put(node, path.split("/", 1)[1], data)
    fs = node.fs()
    try:
        first = next(iter(files))
        assert fs.cat_file(first) == files[first]  # the parent's connections are in use
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        workers = [ctx.Process(target=_child_reads, args=(fs, files, out)) for _ in range(3)]
        for w in workers:
            w.start()
        results = [out.get(timeout=60) for _ in workers]
        for w in workers:
            w.join(timeout=30)
            assert w.exitcode == 0
        assert {pid for pid, _, _, _ in results}.isdisjoint({os.getpid()})
        assert all(ok for _, ok, _, _ in results)
        assert all(g == 0 for _, _, g, _ in results)  # no worker sent a GET of its own
        assert all(hits >= 8 for _, _, _, hits in results)
        assert fs.cat_file(first) == files[first]  # the parent still reads after
        assert gets(fs) == 0
    finally:
        fs.close()


def test_unmounted_midway_fsspec_reads_the_store(
    tree: TreeServer, s3_server: S3Server, aws_env: None
) -> None:
    data = os.urandom(5 * MiB)
    with node_mount(tree, s3_server) as node:
        put(node, "a.bin", data)
        put(node, "b.bin", data)
        fs = node.fs()
        assert fs.cat_file(f"{node.name}/a.bin") == data
        assert gets(fs) == 0
        sockets = node.sockets()
    try:
        assert not any(os.path.exists(p) for p in sockets)  # removed at unmount
        assert fs.cat_file(f"{node.name}/b.bin") == data  # not in the client's window
        assert gets(fs) == 1  # both blocks in one ranged GET
    finally:
        fs.close()


def test_a_killed_mount_s_stale_socket_is_skipped(
    tree: TreeServer, s3_server: S3Server, aws_env: None
) -> None:
    data = os.urandom(5 * MiB)
    with node_mount(tree, s3_server) as node:
        put(node, "a.bin", data)
        pid = runtime.read_pid(str(node.mount.root.resolve()))
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert runtime.wait_for_exit(pid, 10)
        stale = node.sockets()
        assert len(stale) == 1  # left behind, nobody listening
        fs = node.fs()
        try:
            assert fs.cat_file(f"{node.name}/a.bin") == data
            assert gets(fs) == 1  # both blocks in one ranged GET
            assert mount_hits(fs) == 0
        finally:
            fs.close()
            os.unlink(stale[0])


def test_local_mount_false_never_asks_the_mount(node: Node) -> None:
    data = os.urandom(5 * MiB)
    put(node, "a.bin", data)
    assert (node.mount.root / "a.bin").read_bytes() == data
    fs = node.fs(local_mount=False)
    try:
        assert fs.cat_file(f"{node.name}/a.bin") == data
        assert gets(fs) == 1  # both blocks in one ranged GET
        assert mount_hits(fs) == 0
        assert node.served() == 0
        assert fs._connections.volume(node.name).blocks._local is None
    finally:
        fs.close()


def test_no_local_blocks_mount_serves_no_socket(
    tree: TreeServer, s3_server: S3Server, aws_env: None
) -> None:
    with node_mount(tree, s3_server, ["-o", "no_local_blocks"]) as node:
        assert node.sockets() == []
        put(node, "a.bin", b"x" * 100)
        fs = node.fs()
        try:
            assert fs.cat_file(f"{node.name}/a.bin") == b"x" * 100
            assert gets(fs) == 1
        finally:
            fs.close()


def test_a_rewritten_file_is_never_served_stale(node: Node) -> None:
    old = os.urandom(5 * MiB)
    put(node, "a.bin", old)
    path = node.mount.root / "a.bin"
    assert path.read_bytes() == old  # the mount holds the old version's blocks
    fs = node.fs()
    try:
        assert fs.cat_file(f"{node.name}/a.bin") == old
        new = os.urandom(5 * MiB)
        path.write_bytes(new)  # rewritten through the mount
        assert fs.cat_file(f"{node.name}/a.bin") == new
        newer = os.urandom(3 * MiB)
        writer = node.fs(local_mount=False)
        try:
            writer.pipe_file(f"{node.name}/a.bin", newer)  # and through fsspec
        finally:
            writer.close()
        assert fs.cat_file(f"{node.name}/a.bin") == newer
        eventually(lambda: path.stat().st_size == len(newer))
        assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(newer).digest()
        assert gets(fs) == 0
    finally:
        fs.close()


def test_a_handle_opened_before_a_rewrite_gets_estale_not_new_bytes(node: Node) -> None:
    old = os.urandom(9 * MiB)
    put(node, "a.bin", old)
    fs = node.fs()
    try:
        with fs.open(f"{node.name}/a.bin", "rb") as f:
            f.seek(4 * MiB)  # not from the start: nothing is fetched ahead of it
            assert f.read(10) == old[4 * MiB : 4 * MiB + 10]
            writer = node.fs(local_mount=False)
            try:
                writer.pipe_file(f"{node.name}/a.bin", os.urandom(9 * MiB))
            finally:
                writer.close()
            f.seek(8 * MiB)  # a block nobody read: the mount's GET names the old version
            with pytest.raises(OSError) as caught:
                f.read(10)
            assert caught.value.errno == errno.ESTALE
    finally:
        fs.close()
