"""Write-back uploads through the real committer and tree: one committed after a rename
it did not see follows the file to its new key before the tree records it (the soak's
lost checkpoint); one whose file the tree lost in a crash stays in the UFS."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
import trio

from cloudfs.data.commit import Committer
from cloudfs.data.journal import JournalEntry, WriteJournal
from cloudfs.data.uploader import Uploader, UploadPolicy
from cloudfs.errors import ObjectChanged
from cloudfs.metrics import Metrics
from cloudfs.types import ROOT_INODE, Attr, InodeId
from testkit.meta_world import make_world
from tests.unit.data.test_writeback import drained, run, staged

R = ROOT_INODE


def _committer(meta: Any, store: Any) -> Committer:
    async def call(fn: Any, *args: Any) -> Any:
        return fn(*args)

    def ignore(_: Attr | InodeId) -> None:
        pass

    return Committer(meta, store, call, call, ignore, ignore)


def _entry(inode: InodeId, size: int) -> JournalEntry:
    return JournalEntry(
        inode=inode, seq=1, key="ckpt/latest.tmp", size=size, mtime_ns=1, sealed_at=0.0,
        data_path="",
    )  # fmt: skip


def test_an_upload_whose_file_was_renamed_before_its_commit_lands_under_the_new_name(
    tmp_path: Path,
) -> None:
    w = make_world("memory-kv", str(tmp_path))
    meta, store = w.meta, w.store
    ckpt = meta.mkdir(R, b"ckpt", stat.S_IFDIR | 0o755, 0, 0).inode
    old = meta.create(ckpt, b"latest.bin", stat.S_IFREG | 0o644, 0, 0).inode
    w.upload(old, b"old checkpoint")
    new = meta.create(ckpt, b"latest.tmp", stat.S_IFREG | 0o644, 0, 0).inode
    data = b"new checkpoint, longer"
    meta.commit_pending(new, len(data), 1)
    # the uploader put the bytes and looked at the key: still latest.tmp ...
    info = store.put_bytes("ckpt/latest.tmp", data)
    # ... then the trainer renamed it over latest.bin (no UFS call: it is pending)
    meta.rename(ckpt, b"latest.tmp", ckpt, b"latest.bin")
    trio.run(_committer(meta, store).uploaded, _entry(new, len(data)), info)
    assert store.get_range("ckpt/latest.bin", 0, 1 << 20) == data
    assert meta.getattr(new).etag != ""
    assert [k for k in store.stored_keys() if k.startswith("ckpt/latest")] == ["ckpt/latest.bin"]
    meta.close()


def test_an_upload_does_not_carry_off_another_files_bytes_put_under_its_old_name(
    tmp_path: Path,
) -> None:
    """The soak's second race: latest.tmp's upload finished, the file was renamed
    away, and the next checkpoint (another inode) was put under latest.tmp. Moving
    "what was put" must not move the newer file's bytes: ObjectChanged, nothing
    moved or recorded, and the uploader puts its journaled bytes again later."""
    w = make_world("memory-kv", str(tmp_path))
    meta, store = w.meta, w.store
    ckpt = meta.mkdir(R, b"ckpt", stat.S_IFDIR | 0o755, 0, 0).inode
    first = meta.create(ckpt, b"latest.tmp", stat.S_IFREG | 0o644, 0, 0).inode
    meta.commit_pending(first, 5, 1)
    mine = store.put_bytes("ckpt/latest.tmp", b"first")
    meta.rename(ckpt, b"latest.tmp", ckpt, b"latest.bin")
    second = meta.create(ckpt, b"latest.tmp", stat.S_IFREG | 0o644, 0, 0).inode
    w.upload(second, b"second, newer")
    with pytest.raises(ObjectChanged):
        trio.run(_committer(meta, store).uploaded, _entry(first, 5), mine)
    assert store.get_range("ckpt/latest.tmp", 0, 100) == b"second, newer"
    assert "ckpt/latest.bin" not in store.stored_keys()
    assert meta.getattr(first).etag == ""  # still owed: the uploader tries again
    meta.close()


def test_a_recovered_entry_the_tree_lost_stays_in_the_ufs_under_its_old_name(
    tmp_path: Path,
) -> None:
    """After a crash whose tree lost the file, the journal's bytes are uploaded under the
    name they were closed with and kept there: no tree entry to commit them to, and
    nothing else holds them once the journal forgets them."""
    w = make_world("memory-kv", str(tmp_path / "tree"))
    journal = WriteJournal(str(tmp_path / "wb"))
    journal.seal(9, "ckpt/last.pt", 4, 1, staged(tmp_path, "s", b"data"))  # inode 9: unknown
    uploader = Uploader(
        journal, w.store, _committer(w.meta, w.store), Metrics(), UploadPolicy(),
        trio.CapacityLimiter(2),
    )  # fmt: skip

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(uploader.run)
            uploader.submit(WriteJournal(str(tmp_path / "wb")).recover()[0], recovered=True)
            assert await drained(uploader, 10)
            nursery.cancel_scope.cancel()

    run(main)
    assert w.store.get_range("ckpt/last.pt", 0, 100) == b"data"
    w.meta.close()
