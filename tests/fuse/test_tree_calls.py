"""How many tree-service calls a mount makes per namespace change, counted at the server.

A regression (one more round trip per new file, per rename) shows here as a
number, not as a slower benchmark weeks later. The server runs in this process
with an interceptor that counts every MetaService call by method; the mount is
a real ``cloudfs mount grpc://...`` whose data lives in a local directory.

What the kernel asks to read is left out: it looks a name up before a create
or a rename onto it, and gets attributes again after a change made them
stale, as often as its caches say, not as the mount does.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import grpc
import pytest

from cloudfs.config import S3Config
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine import codec
from cloudfs.meta.engine.kv import KVEngine
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.meta.service.server import TreeServer
from cloudfs.meta.service.volumes import Volumes
from cloudfs.meta.wire.volumes import VolumeSpec
from cloudfs.ufs.factory import open_store
from testkit.mounts import Backing, Mount, mounted
from testkit.tree_check import check_tree, tree_kv, volume_tree_id

pytestmark = [pytest.mark.fuse]

BACKGROUND = {"Heartbeat", "Watch", "ReportCache", "StatFs", "GetVolume", "JoinGroup"}
KERNEL_READS = {"Lookup", "LookupIfListed", "GetAttr"}


class CallCounter(grpc.ServerInterceptor):  # type: ignore[misc]
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()

    def intercept_service(
        self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        method = str(details.method).rpartition("/")[2]
        with self._lock:
            self.calls[method] += 1
        return continuation(details)

    def take_after_release(self, within: float = 5.0) -> Counter[str]:
        """``take``, once a Release came (the kernel sends it after close returns)."""
        calls: Counter[str] = Counter()
        deadline = time.monotonic() + within
        while not calls["Release"] and time.monotonic() < deadline:
            calls += self.take()
            time.sleep(0.02)
        return calls + self.take()

    def take(self) -> Counter[str]:
        """The calls since the last take, less the background ones."""
        with self._lock:
            calls, self.calls = self.calls, Counter()
        return Counter({m: n for m, n in calls.items() if m not in BACKGROUND})


class Counted(NamedTuple):
    mount: Mount
    counter: CallCounter
    meta: EmbeddedMeta  # the server's tree of the volume
    tree: KVEngine  # its keys in the server's engine


@pytest.fixture(params=["through"])
def counted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Counted]:
    """A mount (``--write-mode`` the param) through an in-process tree server that counts."""
    data = tmp_path / "data"
    data.mkdir()
    counter = CallCounter()
    engine = MemoryKV()
    volumes = Volumes(engine, lambda uri: open_store(uri, S3Config()))
    server = TreeServer(volumes, "127.0.0.1:0", interceptors=(counter,))
    server.start()
    address = f"127.0.0.1:{server.port}"
    client = VolumeClient(address)
    try:
        client.create(VolumeSpec(name="counted", ufs_uri=f"file://{data}", meta_ttl=3600))
    finally:
        client.close()
    try:
        backing = Backing(f"grpc://{address}/counted", local_dir=data)
        with mounted(backing, ["--write-mode", request.param]) as mount:
            (mount.root / "d").mkdir()
            os.listdir(mount.root / "d")
            counter.take_after_release()  # the kernel's releasedir comes after listdir returns
            keys = tree_kv(engine, volume_tree_id(engine, "counted"))
            yield Counted(mount, counter, volumes.tree("counted"), keys)
    finally:
        server.stop(0)
        volumes.close()


def _changes(calls: Counter[str]) -> Counter[str]:
    return Counter({m: n for m, n in calls.items() if m not in KERNEL_READS})


@pytest.mark.parametrize("counted", ["through", "back"], indirect=True)
def test_a_new_file_costs_two_tree_calls_and_a_release(
    counted: Counted,
) -> None:
    """create + open + object key are one call; the commit at close is the other (in
    write-back: the size pending in the journal; the upload commits later)."""
    mount, counter, _, _ = counted
    back = "back" in mount.options
    counter.take()
    (mount.root / "d" / "new.bin").write_bytes(b"x" * 1000)
    calls = _changes(counter.take_after_release())
    commit = "CommitPending" if back else "CommitUpload"
    calls.pop("CommitUpload" if back else "", None)  # an upload that already ran behind
    calls.pop("ObjectKey" if back else "", None)
    assert calls == Counter({"CreateOpen": 1, commit: 1, "Release": 1}), calls


def test_rename_unlink_and_chmod_cost_one_tree_call_each(
    counted: Counted,
) -> None:
    mount, counter, _, _ = counted
    d = mount.root / "d"
    (d / "a").write_bytes(b"a")
    os.stat(d / "a")
    counter.take_after_release()
    os.rename(d / "a", d / "b")
    assert _changes(counter.take()) == Counter({"Rename": 1})
    os.chmod(d / "b", 0o600)
    assert _changes(counter.take()) == Counter({"SetAttr": 1})
    os.unlink(d / "b")
    assert _changes(counter.take()) == Counter({"Unlink": 1})


def _open_counts(tree: KVEngine) -> dict[bytes, bytes]:
    with tree.transaction(write=False) as txn:
        return dict(txn.scan(codec.OPEN_PREFIX))


def test_releases_made_at_once_go_out_together_and_give_every_open_back(
    counted: Counted,
) -> None:
    """16 files closed at once: their releases queue behind the one in flight and go as
    ReleaseMany, never one request per file more; every open is given back, and the
    file unlinked while open is freed by its release."""
    mount, counter, meta, tree = counted
    d = mount.root / "d"
    files = [open(d / f"f{i:02d}", "wb") for i in range(16)]  # noqa: SIM115
    for f in files:
        f.write(b"x")
        f.flush()
    os.unlink(d / "f00")  # open and nameless
    assert _open_counts(tree)
    counter.take()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda f: f.close(), files))
    deadline = time.monotonic() + 10
    while _open_counts(tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _open_counts(tree) == {}
    calls = counter.take()
    assert calls["Release"] + calls["ReleaseMany"] <= 16, calls
    assert sorted(os.listdir(d)) == [f"f{i:02d}" for i in range(1, 16)]
    check_tree(meta, tree)


def test_creates_in_a_row_ask_nothing_of_their_directory_and_a_change_elsewhere_shows(
    counted: Counted,
) -> None:
    """Each create makes the kernel drop its directory's attributes and ask for them before
    the next create: the mount answers from what CreateOpen said (no GetAttr). Another
    mount's change in that directory still shows (the change feed drops what was known)."""
    mount, counter, meta, _ = counted
    d = mount.root / "d"
    counter.take()
    for i in range(10):
        os.close(os.open(d / f"n{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    calls = counter.take_after_release()
    assert calls["CreateOpen"] == 10 and calls["GetAttr"] == 0, calls
    assert os.stat(d).st_nlink == 2
    meta.mkdir(meta.lookup(1, b"d").inode, b"made-elsewhere", 0o40755, 0, 0)
    deadline = time.monotonic() + 10
    while os.stat(d).st_nlink != 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.stat(d).st_nlink == 3
