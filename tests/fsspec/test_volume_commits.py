"""Write-through commits of one file by two threads of one process (``VolumeHandle.commit``,
under fsspec and the S3 gateway): the version the tree records is the one the UFS holds.

Found by the gateway's concurrent-writers test: writer A's upload, then writer B's
(over A's), B's tree commit, then A's; the tree named A's version, the UFS held B's,
and every read of the file failed until its next write.
"""

from __future__ import annotations

import threading
from pathlib import Path

from cloudfs.client.volume import VolumeHandle
from cloudfs.fsspec.filesystem import CloudFileSystem
from cloudfs.types import ObjectInfo
from cloudfs.ufs.forwarding import ForwardingObjectStore
from cloudfs.ufs.interface import ObjectStore

from .conftest import Volume


class FirstPutWaits(ForwardingObjectStore):
    """The first ``put_file`` returns only once a second one has (or after ``patience``):
    two overlapping commits finish their uploads in the order that used to go wrong."""

    def __init__(self, inner: ObjectStore, patience: float) -> None:
        super().__init__(inner)
        self._patience = patience
        self._puts = 0
        self._guard = threading.Lock()
        self.second_put = threading.Event()
        self.first_put = threading.Event()  # the first upload is under way
        self.overtaken = False  # the second upload finished while the first waited

    def put_file(self, key: str, path: str, resume: str | None = None) -> ObjectInfo:
        with self._guard:
            self._puts += 1
            first = self._puts == 1
        if first:
            self.first_put.set()
        info = super().put_file(key, path, resume)
        if first:
            self.overtaken = self.second_put.wait(self._patience)
        else:
            self.second_put.set()
        return info


def test_overlapping_commits_leave_the_tree_naming_the_stored_bytes(
    cfs: CloudFileSystem, volume: Volume, tmp_path: Path
) -> None:
    handle: VolumeHandle = cfs._volume(f"{volume.name}/hot", volume.name)
    store = FirstPutWaits(handle.store, patience=1.0)
    handle.store = store  # type: ignore[assignment]
    staged = []
    for n in (1, 2):
        path = tmp_path / f"staged-{n}"
        path.write_bytes(bytes([n]) * (64 * 1024 + n))
        staged.append(str(path))
    first = threading.Thread(
        target=handle.commit, args=((b"hot",), staged[0]), kwargs={"exclusive": False}
    )
    first.start()
    assert store.first_put.wait(10)  # the first upload is under way before the second starts
    handle.commit((b"hot",), staged[1], exclusive=False)
    first.join(10)
    assert not first.is_alive()
    attr = handle.resolve((b"hot",))
    stored = handle.store.head(handle.meta.object_key(attr.inode))
    assert attr.etag == stored.etag
    assert attr.size == stored.size == 64 * 1024 + 2
    assert cfs.cat(f"{volume.name}/hot") == b"\x02" * (64 * 1024 + 2)
    # The second commit waited for the first whole: no upload overtook another.
    assert not store.overtaken
