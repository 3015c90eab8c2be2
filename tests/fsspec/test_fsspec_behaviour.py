"""``cloudfs://`` against a real tree service: what the abstract suite does not pin down.

Ranges and blocks, the tree as the one source of names (a change made through
the tree client a mount uses shows at once), writes that show nothing until
they are committed, and bad input answered with Python's conventional
exceptions, leaving nothing half-made.
"""

from __future__ import annotations

import errno
import os
import stat

import pytest

from cloudfs.data.blocks import ObjectRef, block_key
from cloudfs.fsspec import CloudFileSystem
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.client.tree_uri import parse_tree_uri
from cloudfs.types import ROOT_INODE
from testkit.tree_server import TreeServer
from tests.fsspec.conftest import Volume

BLOCK = 64 * 1024


def requests(fs: CloudFileSystem, op: str) -> float:
    value = fs.metrics.registry.get_sample_value("cloudfs_ufs_requests_total", {"op": op})
    return value or 0.0


def test_ranges_across_blocks_and_from_the_end(tree: TreeServer, volume: Volume) -> None:
    fs = CloudFileSystem(meta_server=tree.address, block_size="64K", skip_instance_cache=True)
    data = os.urandom(5 * BLOCK + 123)
    fs.pipe_file(f"{volume.name}/data.bin", data)
    cases = [(None, None), (0, 10), (BLOCK - 5, 3 * BLOCK + 7), (-100, None), (-200, -100)]
    for start, end in [*cases, (10, 5), (len(data) - 3, len(data) + 50)]:
        assert fs.cat_file(f"cloudfs://{volume.name}/data.bin", start, end) == data[start:end]
    with fs.open(f"{volume.name}/data.bin") as f:
        f.seek(2 * BLOCK + 1)
        assert f.read(BLOCK) == data[2 * BLOCK + 1 : 3 * BLOCK + 1]


def test_blocks_are_the_mounts_blocks_and_served_from_memory(
    tree: TreeServer, volume: Volume
) -> None:
    fs = CloudFileSystem(meta_server=tree.address, block_size="64K", skip_instance_cache=True)
    path = f"{volume.name}/sample.bin"
    fs.pipe_file(path, b"x" * (3 * BLOCK))
    first = fs.cat_file(path)
    gets = requests(fs, "get")
    assert gets >= 1
    assert fs.cat_file(path) == first
    assert requests(fs, "get") == gets, "the second read came from the block cache"
    hits = fs.metrics.registry.get_sample_value("cloudfs_blockcache_hits_total", {"tier": "memory"})
    assert hits == 3
    # The key a grpc:// mount of the volume gives block 0 (its store_id is the tree URI's).
    info = fs.info(path)
    key = GrpcMeta(tree.address, volume.name).object_key(info["inode"])
    ref = ObjectRef(key, info["etag"], info["size"])
    mount_key = block_key(parse_tree_uri(volume.uri).cache_id, ref, 0, BLOCK)
    handle = fs._connections.volume(volume.name)
    assert handle.blocks._memory.contains(mount_key)


def test_a_rewritten_file_is_read_anew(cfs: CloudFileSystem, volume: Volume) -> None:
    path = f"{volume.name}/f"
    cfs.pipe_file(path, b"one")
    assert cfs.cat_file(path) == b"one"
    cfs.pipe_file(path, b"second version")
    assert cfs.cat_file(path) == b"second version"  # a new ETag: new block keys


def test_names_come_from_the_tree_a_mount_uses(
    cfs: CloudFileSystem, tree: TreeServer, volume: Volume
) -> None:
    meta = GrpcMeta(tree.address, volume.name)  # what a grpc:// mount talks to
    try:
        d = meta.mkdir(ROOT_INODE, b"made-by-a-mount", stat.S_IFDIR | 0o755, 0, 0)
        meta.symlink(d.inode, b"link", b"target", 0, 0)
        assert cfs.ls(volume.name, detail=False) == [f"{volume.name}/made-by-a-mount"]
        assert cfs.info(f"{volume.name}/made-by-a-mount/link")["type"] == "link"
        cfs.pipe_file(f"{volume.name}/made-by-a-mount/f", b"abc")
        attr = meta.lookup(d.inode, b"f")
        assert (attr.size, attr.etag != "") == (3, True)
    finally:
        meta.close()
    assert (volume.local_dir / "made-by-a-mount" / "f").read_bytes() == b"abc"  # type: ignore[operator]


def test_nothing_is_visible_before_close_and_a_failed_writer_leaves_nothing(
    cfs: CloudFileSystem, volume: Volume
) -> None:
    path = f"{volume.name}/dir/out.bin"
    with cfs.open(path, "wb") as f:
        f.write(b"x" * 10_000_000)
        f.flush()
        assert not cfs.exists(path)
        assert not cfs.exists(f"{volume.name}/dir")
    assert cfs.cat_file(path) == b"x" * 10_000_000
    with pytest.raises(RuntimeError), cfs.open(f"{volume.name}/dir/bad.bin", "wb") as f:
        f.write(b"partial")
        raise RuntimeError("the writer failed")
    assert cfs.ls(f"{volume.name}/dir", detail=False) == [path]
    assert sorted(os.listdir(volume.local_dir / "dir")) == ["out.bin"]  # type: ignore[operator]
    cfs.pipe_file(path, b"new")
    with pytest.raises(RuntimeError), cfs.open(path, "wb") as f:
        f.write(b"half of a rewrite")
        raise RuntimeError
    assert cfs.cat_file(path) == b"new"


def test_append(cfs: CloudFileSystem, volume: Volume) -> None:
    path = f"{volume.name}/log.txt"
    with cfs.open(path, "ab") as f:
        f.write(b"one\n")
    with cfs.open(path, "a") as t:
        t.write("two\n")
    assert cfs.cat_file(path) == b"one\ntwo\n"


def test_mv_renames_in_the_tree_and_moves_the_objects(cfs: CloudFileSystem, volume: Volume) -> None:
    v = volume.name
    cfs.pipe({f"{v}/a/x": b"1", f"{v}/a/sub/y": b"2"})
    cfs.mkdir(f"{v}/into")
    cfs.mv(f"{v}/a", f"{v}/into")  # an existing directory: moved inside it
    assert cfs.find(v) == [f"{v}/into/a/sub/y", f"{v}/into/a/x"]
    cfs.mv(f"{v}/into/a/x", f"{v}/new/place/x2")  # missing parents are made
    assert cfs.cat_file(f"{v}/new/place/x2") == b"1"
    assert (volume.local_dir / "new/place/x2").read_bytes() == b"1"  # type: ignore[operator]
    assert not (volume.local_dir / "into/a/x").exists()  # type: ignore[operator]


def test_rm_and_rmdir(cfs: CloudFileSystem, volume: Volume) -> None:
    v = volume.name
    cfs.pipe({f"{v}/t/a": b"1", f"{v}/t/b/c": b"2"})
    with pytest.raises(OSError) as err:
        cfs.rmdir(f"{v}/t")
    assert err.value.errno == errno.ENOTEMPTY
    cfs.rm(f"{v}/t", recursive=True)
    assert cfs.ls(v) == []
    assert os.listdir(volume.local_dir) == []  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        cfs.rm(f"{v}/t")


def test_bad_input_gets_the_conventional_exceptions(
    cfs: CloudFileSystem, volume: Volume, tree: TreeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    v = volume.name
    cfs.pipe_file(f"{v}/file", b"data")
    cfs.mkdir(f"{v}/dir")
    with pytest.raises(FileNotFoundError, match="no volume"):
        cfs.cat_file("cloudfs://no-such-volume/x")
    with pytest.raises(FileNotFoundError):
        cfs.ls("no-such-volume")
    with pytest.raises(FileNotFoundError):
        cfs.cat_file(f"{v}/missing")
    with pytest.raises(FileNotFoundError):
        cfs.open(f"{v}/missing/deeper")
    with pytest.raises(IsADirectoryError):
        cfs.cat_file(f"{v}/dir")
    with pytest.raises(IsADirectoryError):
        cfs.open(f"{v}/dir", "wb")
    with pytest.raises(NotADirectoryError):
        cfs.open(f"{v}/file/child", "wb")
    with pytest.raises(NotADirectoryError):
        cfs.ls(f"{v}/file/child")
    with pytest.raises(FileExistsError):
        cfs.open(f"{v}/file", "xb")
    with pytest.raises(FileExistsError):
        cfs.mkdir(f"{v}/dir")
    with pytest.raises(FileExistsError):
        cfs.makedirs(f"{v}/file")
    with pytest.raises(OSError) as err:
        cfs.pipe_file("cloudfs://bad!name/x", b"")
    assert err.value.errno == errno.EINVAL
    assert sorted(cfs.ls(v, detail=False)) == [f"{v}/dir", f"{v}/file"]  # nothing half-made
    assert sorted(os.listdir(volume.local_dir)) == ["dir", "file"]  # type: ignore[arg-type]
    monkeypatch.delenv("CLOUDFS_META_SERVER", raising=False)
    serverless = CloudFileSystem(skip_instance_cache=True)  # cloudfs:///PATH needs no server
    with pytest.raises(ValueError, match="meta_server"):
        serverless.ls(v)
    with pytest.raises(ValueError, match="meta_server"):
        serverless.ls("")
    with pytest.raises(ValueError, match="block_size"):
        CloudFileSystem(meta_server=tree.address, block_size="1K", skip_instance_cache=True)


def test_a_refused_token_is_a_permission_error(volume: Volume) -> None:
    from testkit.tree_server import running_tree_server

    with running_tree_server(token="right-token-0123456789") as guarded:
        name = guarded.new_volume(f"file://{volume.local_dir}").rsplit("/", 1)[1]
        fs = CloudFileSystem(meta_server=guarded.address, token="wrong", skip_instance_cache=True)
        with pytest.raises(PermissionError):
            fs.ls(name)
        fs = CloudFileSystem(
            meta_server=guarded.address, token="right-token-0123456789", skip_instance_cache=True
        )
        assert fs.ls(name) == []


def test_the_environment_names_the_server(
    tree: TreeServer, volume: Volume, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fsspec

    monkeypatch.setenv("CLOUDFS_META_SERVER", tree.address)
    with fsspec.open(f"cloudfs://{volume.name}/hello.txt", "w") as f:
        f.write("hello")
    with fsspec.open(f"cloudfs://{volume.name}/hello.txt", "r") as f:
        assert f.read() == "hello"
    assert volume.name in fsspec.filesystem("cloudfs").ls("", detail=False)


def test_metrics_are_served_to_prometheus(tree: TreeServer, volume: Volume) -> None:
    import urllib.request

    from testkit.servers import free_port

    port = free_port()
    fs = CloudFileSystem(
        meta_server=tree.address, metrics_address=f"127.0.0.1:{port}", skip_instance_cache=True
    )
    fs.pipe_file(f"{volume.name}/m", b"abc")
    fs.cat_file(f"{volume.name}/m")
    fs.cat_file(f"{volume.name}/m")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    assert 'cloudfs_ufs_requests_total{op="get"} 1.0' in text
    assert 'cloudfs_blockcache_hits_total{tier="memory"} 1.0' in text
    assert 'cloudfs_blockcache_misses_total{tier="memory"} 1.0' in text
