"""The tree service over real gRPC: volumes, errors as errnos, tokens, isolation, restarts."""

from __future__ import annotations

import errno
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from cloudfs import errors
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.client.tree_uri import parse_tree_uri
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.meta.engine.kv_lmdb import LmdbKV
from cloudfs.meta.service.server import TreeServer
from cloudfs.meta.service.volumes import Volumes
from cloudfs.meta.wire.volumes import VolumeSpec
from cloudfs.types import ROOT_INODE, InodeId
from cloudfs.v1 import meta_pb2 as pb
from cloudfs.v1.meta_pb2_grpc import MetaServiceStub
from testkit.memory_store import MemoryObjectStore
from testkit.tree_server import running_tree_server

R = ROOT_INODE
FILE = stat.S_IFREG | 0o644


class Clock:
    """Real time, plus whatever a test skips ahead."""

    def __init__(self) -> None:
        self.offset = 0

    def __call__(self) -> int:
        return time.time_ns() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += int(seconds * 1e9)


class Service:
    """An in-process server over LMDB whose volumes all list one memory store per URI."""

    def __init__(self, tmp: Path, token: str | None = None) -> None:
        self.stores: dict[str, MemoryObjectStore] = {}
        self.clock = Clock()
        self.tmp = tmp
        self.token = token
        self.start()

    def start(self, port: int = 0) -> None:
        self.engine = LmdbKV(str(self.tmp / "tree"))
        self.volumes = Volumes(
            self.engine,
            lambda uri: self.stores.setdefault(uri, MemoryObjectStore()),
            clock=self.clock,
        )
        self.server = TreeServer(self.volumes, f"127.0.0.1:{port}", token=self.token)
        self.server.start()
        self.address = f"127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        self.server.stop(0)
        self.volumes.close()
        self.engine.close()

    def volume(self, name: str, uri: str = "file:///data") -> VolumeSpec:
        client = VolumeClient(self.address, token=self.token)
        try:
            return client.create(VolumeSpec(name=name, ufs_uri=uri))
        finally:
            client.close()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service(tmp_path)
    yield svc
    svc.stop()


def test_volumes_are_created_listed_inspected_and_deleted(service: Service) -> None:
    client = VolumeClient(service.address)
    created = service.volume("imagenet", "file:///datasets/imagenet")
    assert created.created_ns > 0 and created.ufs_uri == "file:///datasets/imagenet"
    service.volume("coco")
    assert [v.name for v in client.list()] == ["coco", "imagenet"]
    assert client.get("imagenet").ufs_uri == "file:///datasets/imagenet"
    with pytest.raises(errors.AlreadyExists):
        service.volume("coco")
    with pytest.raises(errors.InvalidArgument):
        service.volume("../escape")
    meta = GrpcMeta(service.address, "coco")
    meta.create(R, b"f", FILE, 0, 0)
    client.delete("coco")
    with pytest.raises(errors.NotFound):
        client.get("coco")
    with pytest.raises(errors.NotFound):
        meta.lookup(R, b"f")  # the volume is gone, and so is its tree
    service.volume("coco")  # a new volume of that name starts empty
    with pytest.raises(errors.NotFound):
        meta.lookup(R, b"f")
    meta.close()
    client.close()


def test_errors_arrive_as_the_same_errnos(service: Service) -> None:
    service.volume("v")
    meta = GrpcMeta(service.address, "v")
    d = meta.mkdir(R, b"d", stat.S_IFDIR | 0o755, 0, 0).inode
    meta.create(d, b"f", FILE, 0, 0)
    cases = [
        (lambda: meta.lookup(R, b"missing"), errno.ENOENT),
        (lambda: meta.mkdir(R, b"d", stat.S_IFDIR | 0o755, 0, 0), errno.EEXIST),
        (lambda: meta.rmdir(R, b"d"), errno.ENOTEMPTY),
        (lambda: meta.lookup(R, b"a/b"), errno.EINVAL),  # names are checked by the server
        (lambda: meta.lookup(R, b"x" * 256), errno.ENAMETOOLONG),
        (lambda: meta.getxattr(d, b"user.none"), errno.ENODATA),
        (lambda: meta.rename(R, b"d", d, b"inside"), errno.EINVAL),
    ]
    for call, expected in cases:
        with pytest.raises(errors.FsError) as caught:
            call()
        assert caught.value.errno == expected, (caught.value, expected)
    meta.close()


def test_a_volume_cannot_reach_another_volumes_inodes(service: Service) -> None:
    service.volume("a", "file:///a")
    service.volume("b", "file:///b")
    a, b = GrpcMeta(service.address, "a"), GrpcMeta(service.address, "b")
    secret = a.create(R, b"secret", FILE, 0, 0).inode
    a.setxattr(secret, b"user.k", b"only in a")
    with pytest.raises(errors.NotFound):
        b.getattr(secret)  # the same number means nothing in b's tree
    with pytest.raises(errors.NotFound):
        b.getxattr(InodeId(secret), b"user.k")
    with pytest.raises(errors.NotFound):
        b.unlink(InodeId(secret), b"x")
    assert a.getxattr(secret, b"user.k") == b"only in a"
    a.close()
    b.close()


def test_a_token_is_required_when_configured(tmp_path: Path) -> None:
    svc = Service(tmp_path, token="s3cret")
    try:
        svc.volume("v")
        with pytest.raises(errors.AccessDenied):
            GrpcMeta(svc.address, "v").getattr(R)
        with pytest.raises(errors.AccessDenied):
            GrpcMeta(svc.address, "v", token="wrong").getattr(R)
        assert GrpcMeta(svc.address, "v", token="s3cret").getattr(R).is_dir
    finally:
        svc.stop()


def test_a_restarted_server_is_picked_up_and_a_dead_one_fails_in_bounded_time(
    service: Service,
) -> None:
    service.volume("v")
    meta = GrpcMeta(service.address, "v", timeout=2.0, listing_timeout=2.0, reconnect=3.0)
    f = meta.create(R, b"kept", FILE, 0, 0).inode
    service.stop()
    started = time.monotonic()
    with pytest.raises(errors.RemoteIOError) as failed:
        meta.getattr(f)
    took = time.monotonic() - started
    assert 2.5 <= took < 10, (took, failed.value)  # it waited out ``reconnect``, then EIO
    service.start(service.server.port)  # the same address: the client reconnects by itself
    assert meta.getattr(f).inode == f  # and the tree survived the restart
    meta.close()


def test_a_call_during_a_restart_waits_for_the_server_rather_than_failing(
    service: Service,
) -> None:
    """A server restarting (a pod rescheduled, an upgrade) is a pause to the mount's
    callers, not EIO to a training job: the call waits for it to listen again."""
    service.volume("v")
    meta = GrpcMeta(service.address, "v", timeout=5.0, listing_timeout=5.0, reconnect=15.0)
    f = meta.create(R, b"kept", FILE, 0, 0).inode
    port = service.server.port
    service.stop()
    restart = threading.Timer(3.0, service.start, args=(port,))
    restart.start()
    started = time.monotonic()
    try:
        assert meta.getattr(f).inode == f
        assert 2.5 <= time.monotonic() - started < 12
    finally:
        restart.join()
        meta.close()


def test_readdir_pages_carry_attributes(service: Service) -> None:
    service.volume("v")
    meta = GrpcMeta(service.address, "v")
    for i in range(25):
        meta.create(R, b"f%02d" % i, FILE, 0, 0)
    names, after = [], None
    while page := meta.readdir(R, after, 10):
        assert all(e.attr.inode and stat.S_ISREG(e.attr.mode) for e in page)
        names += [e.name for e in page]
        after = page[-1].name
    assert names == [b"f%02d" % i for i in range(25)]
    meta.close()


def test_the_cli_manages_volumes_of_a_served_tree(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cloudfs.cli.main", *args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    data = tmp_path / "data"
    data.mkdir()
    with running_tree_server(token="t0ken") as server:
        token_file = tmp_path / "token"
        token_file.write_text("t0ken")
        auth = ["--server", server.address, "--token-file", str(token_file)]
        made = cli("volume", "create", "train", f"file://{data}", *auth)
        assert made.returncode == 0, made.stderr
        listed = cli("volume", "list", *auth, "--json")
        assert '"name": "train"' in listed.stdout
        again = cli("volume", "create", "train", f"file://{data}", *auth)
        assert again.returncode == 1 and again.stderr.strip() == "cloudfs: volume 'train' exists"
        bad = cli("volume", "create", "no/slash", f"file://{data}", *auth)
        assert bad.returncode == 2 and "bad volume name" in bad.stderr
        unauth = cli("volume", "list", "--server", server.address)
        assert unauth.returncode == 1 and "token" in unauth.stderr
        assert cli("volume", "delete", "train", *auth).returncode == 0
        missing = cli("volume", "info", "train", *auth)
        assert missing.returncode == 1 and "no volume 'train'" in missing.stderr
    assert parse_tree_uri(f"grpc://{server.address}/train").volume == "train"


def test_a_dead_mounts_opens_are_given_back_when_its_session_expires(service: Service) -> None:
    service.volume("v")
    a, b = GrpcMeta(service.address, "v"), GrpcMeta(service.address, "v")
    a.start_session()
    b.start_session()
    f = a.create(R, b"held", FILE, 0, 0).inode
    a.open(f)
    b.open(f)
    b.unlink(R, b"held")
    b.release(f)
    assert b.getattr(f).nlink == 0  # unlinked, and still open in mount a
    assert service.server.expire_sessions() == 0  # both sessions are alive
    service.clock.advance(61)  # mount a died: no heartbeat for 61 s
    b.heartbeat()  # b is alive
    assert service.server.expire_sessions() == 1  # a's session ended...
    with pytest.raises(errors.NotFound):
        b.getattr(f)  # ...and the inode it alone held open was freed
    b.close()
    a.close()


def test_an_unmount_ends_its_session_and_gives_back_its_opens(service: Service) -> None:
    service.volume("v")
    a, b = GrpcMeta(service.address, "v"), GrpcMeta(service.address, "v")
    a.start_session()
    f = a.create(R, b"tmp", FILE, 0, 0).inode
    a.open(f)
    a.unlink(R, b"tmp")
    assert b.getattr(f).nlink == 0
    a.close()  # ends the session
    with pytest.raises(errors.NotFound):
        b.getattr(f)
    b.close()


def test_release_many_gives_back_each_open_in_one_call(service: Service) -> None:
    """ReleaseMany (what a mount sends for releases made at once): an inode twice is two
    releases, an unlinked one's last open frees it, and more than the cap is refused."""
    service.volume("v")
    meta = GrpcMeta(service.address, "v")
    meta.start_session()
    kept = meta.create(R, b"kept", FILE, 0, 0).inode
    gone = meta.create(R, b"gone", FILE, 0, 0).inode
    for inode in (kept, kept, gone):
        meta.open(inode)
    meta.unlink(R, b"gone")
    channel = grpc.insecure_channel(service.address)
    stub = MetaServiceStub(channel)
    session = (("cloudfs-session", meta.session),)
    stub.ReleaseMany(pb.InodesRequest(volume="v", inodes=[kept, gone, kept]), metadata=session)
    with pytest.raises(errors.NotFound):
        meta.getattr(gone)
    meta.unlink(R, b"kept")
    with pytest.raises(errors.NotFound):  # no open of it was left
        meta.getattr(kept)
    with pytest.raises(grpc.RpcError) as caught:
        stub.ReleaseMany(pb.InodesRequest(volume="v", inodes=[kept] * 65), metadata=session)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    channel.close()
    meta.close()
