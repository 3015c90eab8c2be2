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
from pathlib import Path
from typing import Any

import grpc
import pytest

from cloudfs.config import S3Config
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.meta.service.server import TreeServer
from cloudfs.meta.service.volumes import Volumes
from cloudfs.meta.wire.volumes import VolumeSpec
from cloudfs.ufs.factory import open_store
from testkit.mounts import Backing, Mount, mounted

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


@pytest.fixture(params=["through"])
def counted(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Mount, CallCounter]]:
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
            yield mount, counter
    finally:
        server.stop(0)
        volumes.close()


def _changes(calls: Counter[str]) -> Counter[str]:
    return Counter({m: n for m, n in calls.items() if m not in KERNEL_READS})


@pytest.mark.parametrize("counted", ["through", "back"], indirect=True)
def test_a_new_file_costs_two_tree_calls_and_a_release(
    counted: tuple[Mount, CallCounter],
) -> None:
    """create + open + object key are one call; the commit at close is the other (in
    write-back: the size pending in the journal; the upload commits later)."""
    mount, counter = counted
    back = "back" in mount.options
    counter.take()
    (mount.root / "d" / "new.bin").write_bytes(b"x" * 1000)
    calls = _changes(counter.take_after_release())
    commit = "CommitPending" if back else "CommitUpload"
    calls.pop("CommitUpload" if back else "", None)  # an upload that already ran behind
    calls.pop("ObjectKey" if back else "", None)
    assert calls == Counter({"CreateOpen": 1, commit: 1, "Release": 1}), calls


def test_rename_unlink_and_chmod_cost_one_tree_call_each(
    counted: tuple[Mount, CallCounter],
) -> None:
    mount, counter = counted
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
