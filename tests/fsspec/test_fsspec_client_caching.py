"""What a ``cloudfs://`` client keeps between calls, through a real tree service:
directories for ``meta_ttl`` (never a file's attributes), keys derived from paths
(asked of the tree for hard links), and blocks fetched ahead of sequential reads."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import pytest

from cloudfs.fsspec import CloudFileSystem
from cloudfs.meta.client.grpc_meta import GrpcMeta
from testkit.tree_server import TreeServer
from tests.fsspec.conftest import Volume

MiB = 1024 * 1024


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """The names every client in this process looked up in the tree (the calls still go)."""
    seen: list[bytes] = []
    real = GrpcMeta.lookup

    def spy(self: GrpcMeta, parent: int, name: bytes):  # type: ignore[no-untyped-def]
        seen.append(name)
        return real(self, parent, name)  # type: ignore[arg-type]

    monkeypatch.setattr(GrpcMeta, "lookup", spy)
    yield seen


def gets(fs: CloudFileSystem) -> float:
    return fs.metrics.registry.get_sample_value("cloudfs_ufs_requests_total", {"op": "get"}) or 0.0


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not seen in time"
        time.sleep(0.02)


def test_a_second_file_in_a_directory_costs_one_lookup(
    cfs: CloudFileSystem, volume: Volume, lookups: list[bytes]
) -> None:
    cfs.pipe_file(f"{volume.name}/a/b/one", b"1")
    cfs.pipe_file(f"{volume.name}/a/b/two", b"2")
    lookups.clear()
    assert cfs.cat_file(f"{volume.name}/a/b/one") == b"1"
    assert cfs.cat_file(f"{volume.name}/a/b/two") == b"2"
    assert lookups == [b"one", b"two"]  # a and b came from the directory cache


def test_a_file_rewritten_elsewhere_is_read_new_at_once(
    tree: TreeServer, cfs: CloudFileSystem, volume: Volume
) -> None:
    """Files' attributes are never cached: close-to-open, as in a mount."""
    other = CloudFileSystem(meta_server=tree.address, skip_instance_cache=True)
    try:
        cfs.pipe_file(f"{volume.name}/d/f", b"old")
        assert cfs.cat_file(f"{volume.name}/d/f") == b"old"
        other.pipe_file(f"{volume.name}/d/f", b"new bytes")
        assert cfs.cat_file(f"{volume.name}/d/f") == b"new bytes"
    finally:
        other.close()


def test_a_directory_replaced_elsewhere_is_found_again(
    tree: TreeServer, cfs: CloudFileSystem, volume: Volume
) -> None:
    """A cached directory removed and made again by another client: the stale inode
    answers not-found, and the path is resolved again from the root."""
    other = CloudFileSystem(meta_server=tree.address, skip_instance_cache=True)
    try:
        cfs.pipe_file(f"{volume.name}/d/f", b"first")
        assert cfs.cat_file(f"{volume.name}/d/f") == b"first"  # d is cached now
        other.rm(f"{volume.name}/d", recursive=True)
        other.pipe_file(f"{volume.name}/d/f", b"second")
        assert cfs.cat_file(f"{volume.name}/d/f") == b"second"
        other.rm(f"{volume.name}/d", recursive=True)
        with pytest.raises(FileNotFoundError):
            cfs.cat_file(f"{volume.name}/d/f")
    finally:
        other.close()


def test_own_renames_and_removals_are_seen_at_once(cfs: CloudFileSystem, volume: Volume) -> None:
    cfs.pipe_file(f"{volume.name}/x/f", b"moved")
    assert cfs.cat_file(f"{volume.name}/x/f") == b"moved"
    cfs.mv(f"{volume.name}/x", f"{volume.name}/y")
    assert cfs.cat_file(f"{volume.name}/y/f") == b"moved"
    with pytest.raises(FileNotFoundError):
        cfs.cat_file(f"{volume.name}/x/f")
    cfs.rm(f"{volume.name}/y", recursive=True)
    assert not cfs.exists(f"{volume.name}/y/f")


def test_a_hard_link_reads_its_first_names_object(cfs: CloudFileSystem, volume: Volume) -> None:
    """A file with two names is kept under its first name's key: the tree says which."""
    cfs.pipe_file(f"{volume.name}/orig", b"linked bytes")
    handle = cfs._volume(volume.name, volume.name)
    inode = handle.resolve((b"orig",)).inode
    handle.meta.link(inode, 1, b"alias")  # type: ignore[arg-type]
    assert cfs.cat_file(f"{volume.name}/alias") == b"linked bytes"
    with cfs.open(f"{volume.name}/alias", "rb") as f:
        assert f.read() == b"linked bytes"


def test_meta_ttl_zero_asks_the_tree_for_every_name(
    tree: TreeServer, volume: Volume, lookups: list[bytes]
) -> None:
    fs = CloudFileSystem(meta_server=tree.address, meta_ttl=0, skip_instance_cache=True)
    try:
        fs.pipe_file(f"{volume.name}/a/f", b"x")
        lookups.clear()
        fs.cat_file(f"{volume.name}/a/f")
        fs.cat_file(f"{volume.name}/a/f")
        assert lookups == [b"a", b"f", b"a", b"f"]
    finally:
        fs.close()


@pytest.mark.parametrize("bad", [-1, "soon"])
def test_a_bad_meta_ttl_is_a_value_error(tree: TreeServer, bad: object) -> None:
    with pytest.raises(ValueError, match="meta_ttl"):
        CloudFileSystem(meta_server=tree.address, meta_ttl=bad, skip_instance_cache=True)


def test_sequential_reads_fetch_the_next_blocks_ahead(tree: TreeServer, volume: Volume) -> None:
    data = os.urandom(5 * MiB + 7)  # blocks of 1 MiB: six
    writer = CloudFileSystem(meta_server=tree.address, skip_instance_cache=True)
    fs = CloudFileSystem(
        meta_server=tree.address, block_size="1M", local_mount=False, skip_instance_cache=True
    )
    try:
        writer.pipe_file(f"{volume.name}/seq.bin", data)
        with fs.open(f"{volume.name}/seq.bin", "rb") as f:
            assert f.read(MiB) == data[:MiB]
            # the first block, then the other five ahead, two to a GET
            eventually(lambda: gets(fs) == 4)
            assert f.read() == data[MiB:]
        assert gets(fs) == 4  # no block twice
    finally:
        fs.close()
        writer.close()


def test_a_random_reader_fetches_nothing_ahead(tree: TreeServer, volume: Volume) -> None:
    data = os.urandom(5 * MiB)
    fs = CloudFileSystem(
        meta_server=tree.address, block_size="1M", local_mount=False, skip_instance_cache=True
    )
    try:
        fs.pipe_file(f"{volume.name}/rand.bin", data)
        with fs.open(f"{volume.name}/rand.bin", "rb") as f:
            f.seek(-10, os.SEEK_END)
            assert f.read() == data[-10:]
            f.seek(2 * MiB)
            assert f.read(100) == data[2 * MiB : 2 * MiB + 100]
        time.sleep(0.3)  # what would have been fetched ahead had time to start
        assert gets(fs) == 2
    finally:
        fs.close()
