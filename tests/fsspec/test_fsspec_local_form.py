"""``cloudfs:///MOUNTPOINT/...``: the local form, through real FUSE mounts on this node.

Embedded mounts (a local directory, a bucket on the test S3 server) serve their
tree on a UNIX socket; a ``grpc://`` mount sends the client to its tree
service. Mounts use ``--meta-ttl 60``: the kernel may keep names and attributes
that long, so a change seen within a few seconds was invalidated, not expired.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cloudfs.control import paths
from cloudfs.fsspec import CloudFileSystem
from testkit.mounts import Backing, Mount, mounted, world_traversable_tmpdir
from testkit.servers import S3Server
from tests.fsspec.conftest import Volume

pytestmark = pytest.mark.slow

TTL = ["--meta-ttl", "60"]
SEEN_WITHIN = 5.0  # seconds: far below the 60 s the kernel may cache


def _need_fuse() -> None:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("FUSE tests need /dev/fuse and root")


@pytest.fixture(params=["local", "s3"])
def mount(
    request: pytest.FixtureRequest, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Mount]:
    """An embedded mount over a local directory or over a bucket."""
    _need_fuse()
    if request.param == "local":
        data = world_traversable_tmpdir("cloudfs-local-form-")
        backing = Backing(uri=f"file://{data}", local_dir=data)
    else:
        bucket = f"local-form-{os.urandom(4).hex()}"
        s3_server.client().create_bucket(Bucket=bucket)
        backing = Backing(uri=f"s3://{bucket}", s3=s3_server, bucket=bucket)
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
            monkeypatch.setenv(key, s3_server.env()[key])  # the client's own credentials
    backing.write_object("seed/a.txt", b"alpha")
    backing.write_object("seed/deep/b.bin", os.urandom(5 * 1024 * 1024 + 3))
    with mounted(backing, TTL) as m:
        yield m


@pytest.fixture
def fs() -> Iterator[CloudFileSystem]:
    cfs = CloudFileSystem(skip_instance_cache=True)  # no tree service needed
    yield cfs
    cfs.close()


def url(m: Mount, rel: str = "") -> str:
    return f"cloudfs://{m.root}/{rel}".rstrip("/")


def eventually(check: Callable[[], bool], timeout: float = SEEN_WITHIN) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the change was not seen in time")
        time.sleep(0.05)


def test_listings_attributes_and_bytes_agree_with_the_mount(
    mount: Mount, fs: CloudFileSystem
) -> None:
    root = mount.root
    assert sorted(fs.ls(url(mount, "seed"), detail=False)) == sorted(
        f"{root}/seed/{n}" for n in os.listdir(root / "seed")
    )
    info = fs.info(url(mount, "seed/deep/b.bin"))
    st = os.stat(root / "seed/deep/b.bin")
    assert (info["size"], info["inode"], info["type"]) == (st.st_size, st.st_ino, "file")
    data = (root / "seed/deep/b.bin").read_bytes()
    assert fs.cat_file(url(mount, "seed/deep/b.bin")) == data
    assert (
        fs.cat_file(url(mount, "seed/deep/b.bin"), start=4 * 1024 * 1024 - 7, end=-2)
        == (data[4 * 1024 * 1024 - 7 : -2])
    )
    found = fs.find(url(mount, "seed"))
    assert found == [f"{root}/seed/a.txt", f"{root}/seed/deep/b.bin"]
    assert fs.cat_file(found[0]) == b"alpha"  # names round-trip
    assert fs.glob(f"{root}/seed/*/*.bin") == [f"{root}/seed/deep/b.bin"]


def test_a_file_the_mount_read_costs_the_local_form_no_get(
    mount: Mount, fs: CloudFileSystem
) -> None:
    """The client reads through this mount's block socket: its cache is the client's."""
    data = (mount.root / "seed/deep/b.bin").read_bytes()  # now in the mount's memory tier
    assert fs.cat_file(url(mount, "seed/deep/b.bin")) == data
    sample = fs.metrics.registry.get_sample_value
    assert (sample("cloudfs_ufs_requests_total", {"op": "get"}) or 0.0) == 0
    assert sample("cloudfs_blockcache_hits_total", {"tier": "mount"}) == 2  # 4 MiB blocks


def test_writes_through_the_local_form_reach_the_mount_at_once(
    mount: Mount, fs: CloudFileSystem
) -> None:
    root = mount.root
    assert not (root / "out").exists()  # the kernel may now cache the absence
    assert os.stat(root / "seed/a.txt").st_size == 5  # and this size, for 60 s
    fs.pipe_file(url(mount, "out/x.bin"), b"from fsspec")
    eventually(lambda: (root / "out" / "x.bin").exists())
    assert (root / "out/x.bin").read_bytes() == b"from fsspec"
    fs.pipe_file(url(mount, "seed/a.txt"), b"rewritten!")
    eventually(lambda: os.stat(root / "seed/a.txt").st_size == 10)
    assert (root / "seed/a.txt").read_bytes() == b"rewritten!"
    fs.mv(url(mount, "out/x.bin"), url(mount, "out/y.bin"))
    eventually(lambda: os.listdir(root / "out") == ["y.bin"])
    fs.mkdir(url(mount, "made"))
    eventually(lambda: (root / "made").is_dir())
    fs.rm(url(mount, "out"), recursive=True)
    eventually(lambda: not (root / "out").exists())
    with fs.open(url(mount, "made/w.txt"), "wb") as f:
        f.write(b"opened wb")
    eventually(lambda: (root / "made/w.txt").exists())
    assert (root / "made/w.txt").read_bytes() == b"opened wb"


def test_writes_through_the_mount_reach_the_local_form(mount: Mount, fs: CloudFileSystem) -> None:
    root = mount.root
    (root / "ckpt").mkdir()
    (root / "ckpt/step-1.pt").write_bytes(b"weights" * 1000)
    assert fs.cat_file(url(mount, "ckpt/step-1.pt")) == b"weights" * 1000
    os.rename(root / "ckpt/step-1.pt", root / "ckpt/step-2.pt")
    assert fs.ls(url(mount, "ckpt"), detail=False) == [f"{root}/ckpt/step-2.pt"]
    (root / "ckpt/step-2.pt").unlink()
    assert not fs.exists(url(mount, "ckpt/step-2.pt"))


def test_parquet_through_the_local_form(mount: Mount) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame({"x": list(range(1000)), "y": [str(i) for i in range(1000)]})
    frame.to_parquet(url(mount, "tables/t.parquet"))
    assert (mount.root / "tables/t.parquet").stat().st_size > 0
    assert pd.read_parquet(url(mount, "tables/t.parquet")).equals(frame)
    assert pd.read_parquet(mount.root / "tables/t.parquet").equals(frame)


def _read_in_child(path: str, queue: multiprocessing.Queue[bytes]) -> None:
    import fsspec

    queue.put(fsspec.filesystem("cloudfs").cat_file(path))


def test_a_forked_child_reads_through_the_local_form(mount: Mount) -> None:
    import fsspec

    fsspec.filesystem("cloudfs").cat_file(url(mount, "seed/a.txt"))  # the parent's handle
    ctx = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[bytes] = ctx.Queue()
    child = ctx.Process(target=_read_in_child, args=(url(mount, "seed/deep/b.bin"), queue))
    child.start()
    data = queue.get(timeout=60)
    child.join(30)
    assert child.exitcode == 0
    assert data == (mount.root / "seed/deep/b.bin").read_bytes()


def test_a_grpc_mount_sends_the_client_to_its_tree_service(
    volume: Volume, cfs: CloudFileSystem, fs: CloudFileSystem
) -> None:
    _need_fuse()
    with mounted(Backing(uri=volume.uri, local_dir=volume.local_dir)) as m:
        assert not paths.tree_socket(str(m.root)).exists()  # nothing served: the service is
        fs.pipe_file(url(m, "via-local-form.txt"), b"local form")
        assert cfs.cat_file(f"{volume.name}/via-local-form.txt") == b"local form"
        assert fs.ls(url(m), detail=False) == [f"{m.root}/via-local-form.txt"]
        eventually(lambda: (m.root / "via-local-form.txt").exists())


def test_a_read_only_mount_refuses_changes_through_its_socket(fs: CloudFileSystem) -> None:
    _need_fuse()
    data = world_traversable_tmpdir("cloudfs-local-form-ro-")
    (data / "kept.txt").write_bytes(b"kept")
    with mounted(Backing(uri=f"file://{data}", local_dir=data), ["--read-only"]) as m:
        assert fs.cat_file(url(m, "kept.txt")) == b"kept"
        with pytest.raises(OSError) as err:
            fs.pipe_file(url(m, "new.txt"), b"no")
        assert err.value.errno == errno.EROFS
        with pytest.raises(OSError) as err:
            fs.rm(url(m, "kept.txt"))
        assert err.value.errno == errno.EROFS
    assert (data / "kept.txt").read_bytes() == b"kept"


def test_a_path_outside_every_mount_is_not_found(fs: CloudFileSystem, tmp_path: Path) -> None:
    (tmp_path / "plain.txt").write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match="not under a CloudFS mount"):
        fs.cat_file(f"cloudfs://{tmp_path}/plain.txt")
    with pytest.raises(FileNotFoundError):
        fs.ls(f"cloudfs://{tmp_path}")


def test_the_socket_goes_with_the_mount(fs: CloudFileSystem) -> None:
    _need_fuse()
    data = world_traversable_tmpdir("cloudfs-local-form-gone-")
    with mounted(Backing(uri=f"file://{data}", local_dir=data), TTL) as m:
        socket = paths.tree_socket(str(m.root))
        assert socket.exists()
        assert oct(socket.stat().st_mode & 0o777) == oct(0o600)
        assert fs.ls(url(m)) == []
        root = m.root
    assert not socket.exists()
    with pytest.raises(FileNotFoundError):
        fs.ls(f"cloudfs://{root}")


def _ls(path: str) -> list[str]:
    return list(CloudFileSystem(skip_instance_cache=True).ls(path, detail=False))


def test_another_users_mount_is_a_permission_error() -> None:
    _need_fuse()
    from testkit.users import ALICE, run_as

    data = world_traversable_tmpdir("cloudfs-local-form-theirs-")
    with mounted(Backing(uri=f"file://{data}", local_dir=data)) as m:  # root's mount
        outcome = run_as(ALICE, _ls, url(m))
    assert outcome.errno == errno.EACCES, outcome
