"""WriteJournal and Uploader: durable entries, recovery, supersession, retries, drain."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from cloudfs.data.journal import JournalEntry, WriteJournal
from cloudfs.data.space import StagingSpace
from cloudfs.data.uploader import Uploader, UploadPolicy
from cloudfs.errors import FsError, NoSpace, RemoteIOError
from cloudfs.metrics import Metrics
from cloudfs.types import ObjectInfo
from cloudfs.ufs.faults import FaultyObjectStore
from testkit.memory_store import MemoryObjectStore


def staged(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


# -- journal -------------------------------------------------------------------


def test_sealed_entries_survive_a_restart_in_order(tmp_path: Path) -> None:
    journal = WriteJournal(str(tmp_path / "wb"))
    a = journal.seal(5, "dir/a", 3, 111, staged(tmp_path, "s1", b"abc"))
    b = journal.seal(6, "dir/b", 0, 222, staged(tmp_path, "s2", b""))
    assert not (tmp_path / "s1").exists()  # moved, not copied
    again = WriteJournal(str(tmp_path / "wb")).recover()
    assert again == [a, b]
    assert Path(again[0].data_path).read_bytes() == b"abc"
    restarted = WriteJournal(str(tmp_path / "wb"))
    restarted.recover()
    c = restarted.seal(5, "dir/a", 1, 333, staged(tmp_path, "s3", b"z"))
    assert c.seq > b.seq  # sequence numbers keep growing across restarts


def test_recovery_removes_half_sealed_debris(tmp_path: Path) -> None:
    journal = WriteJournal(str(tmp_path / "wb"))
    kept = journal.seal(1, "k", 1, 1, staged(tmp_path, "s", b"k"))
    (tmp_path / "wb" / "data" / "99").write_bytes(b"data whose record never landed")
    (tmp_path / "wb" / "records" / "98.json.tmp").write_text("{")  # the older format's debris
    (tmp_path / "wb" / "records" / "97.json").write_text("not json")
    assert WriteJournal(str(tmp_path / "wb")).recover() == [kept]
    assert sorted(os.listdir(tmp_path / "wb" / "data")) == [str(kept.seq)]
    assert os.listdir(tmp_path / "wb" / "records") == []


def test_records_of_the_older_format_are_recovered_and_removed(tmp_path: Path) -> None:
    """A journal left by a version with one record file per entry still uploads."""
    wb = tmp_path / "wb"
    WriteJournal(str(wb))
    (wb / "data" / "7").write_bytes(b"old")
    record = {"version": 1, "seq": 7, "inode": 3, "key": "k", "size": 3, "mtime_ns": 1,
              "sealed_at": 1.0, "data_path": "/elsewhere/7"}  # fmt: skip
    (wb / "records" / "7.json").write_text(json.dumps(record))
    journal = WriteJournal(str(wb))
    [entry] = journal.recover()
    assert (entry.seq, entry.inode, entry.data_path) == (7, 3, str(wb / "data" / "7"))
    assert journal.seal(3, "k", 1, 2, staged(tmp_path, "s", b"n")).seq == 8
    journal.remove(entry)
    assert os.listdir(wb / "records") == [] and not (wb / "data" / "7").exists()


def test_remove_is_idempotent(tmp_path: Path) -> None:
    journal = WriteJournal(str(tmp_path / "wb"))
    entry = journal.seal(1, "k", 1, 1, staged(tmp_path, "s", b"k"))
    journal.remove(entry)
    journal.remove(entry)
    assert journal.recover() == []


def test_a_failed_seal_leaves_the_source_in_place(tmp_path: Path) -> None:
    journal = WriteJournal(str(tmp_path / "wb"))
    source = staged(tmp_path, "s", b"keep me")
    segments = tmp_path / "wb" / "log"
    segments.rmdir()
    segments.write_text("a file where the log directory should be")
    with pytest.raises(FsError):
        journal.seal(1, "k", 7, 1, source)
    assert Path(source).read_bytes() == b"keep me" and os.listdir(tmp_path / "wb" / "data") == []


# -- uploader ------------------------------------------------------------------


class Sink:
    """The VFS's side, in memory: inode -> key (None once unlinked), commits seen."""

    def __init__(self) -> None:
        self.keys: dict[int, str | None] = {}
        self.commits: list[tuple[int, int, str]] = []

    async def key_of(self, inode: int) -> str | None:
        return self.keys.get(inode)

    async def uploaded(self, entry: JournalEntry, info: ObjectInfo) -> None:
        self.commits.append((entry.inode, entry.seq, info.etag))


class World:
    def __init__(self, tmp_path: Path, policy: UploadPolicy, fail_ratio: float = 0.0) -> None:
        self.tmp = tmp_path
        self.inner = MemoryObjectStore()
        self.store = FaultyObjectStore(self.inner, fail_ratio=fail_ratio, seed=7, ops=["put_file"])
        self.journal = WriteJournal(str(tmp_path / "wb"))
        self.sink = Sink()
        self.metrics = Metrics()
        self.uploader = Uploader(
            self.journal, self.store, self.sink, self.metrics, policy, trio.CapacityLimiter(4)
        )
        self.n = 0

    def close_file(self, inode: int, key: str, data: bytes) -> JournalEntry:
        self.n += 1
        self.sink.keys[inode] = key
        source = staged(self.tmp, f"staged{self.n}", data)
        entry = self.journal.seal(inode, key, len(data), 1, source)
        self.uploader.submit(entry)
        return entry

    def gauge(self, name: str) -> float:
        value = self.metrics.registry.get_sample_value(name)
        assert value is not None
        return value


async def drained(uploader: Uploader, seconds: float) -> bool:
    """Whether ``uploader`` drains within ``seconds`` of virtual time.

    Waited for in 1 s slices: while a worker thread runs (a slow, loaded
    machine) the mock clock may jump to the next deadline, and one long
    deadline would then expire at the first such jump.
    """
    for _ in range(max(1, int(seconds))):
        with trio.move_on_after(1):
            await uploader.drain()
            return True
    return False


def run(main: Callable[[], Awaitable[None]]) -> None:
    """Virtual time for back-offs and delays; it jumps only when nothing (no
    worker thread either) has run for a while."""
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.1))


def test_uploads_every_closed_file_then_forgets_it(tmp_path: Path) -> None:
    w = World(tmp_path, UploadPolicy())

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.uploader.run)
            w.close_file(1, "a/one", b"1" * 1000)
            w.close_file(2, "a/two", b"2")
            assert w.uploader.backlog().files == 2
            assert await drained(w.uploader, 10)
            nursery.cancel_scope.cancel()

    run(main)
    assert w.inner.data("a/one") == b"1" * 1000 and w.inner.data("a/two") == b"2"
    assert sorted(c[0] for c in w.sink.commits) == [1, 2]
    assert w.journal.recover() == [] and w.uploader.pending(1) is None
    assert w.gauge("cloudfs_writeback_pending_files") == 0
    assert w.gauge("cloudfs_writeback_uploaded_bytes_total") == 1001


def test_a_file_rewritten_within_the_delay_is_uploaded_once(tmp_path: Path) -> None:
    w = World(tmp_path, UploadPolicy(delay=5.0))

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.uploader.run)
            w.close_file(1, "ckpt", b"v1")
            await trio.sleep(1)
            newest = w.close_file(1, "ckpt", b"v2")
            assert w.uploader.pending(1) == newest
            assert w.uploader.backlog().files == 1
            await trio.sleep(60)
            nursery.cancel_scope.cancel()

    run(main)
    assert w.store.stats.calls["put_file"] == 1 and w.inner.data("ckpt") == b"v2"
    assert w.journal.recover() == []


def test_an_unlinked_file_is_never_uploaded(tmp_path: Path) -> None:
    w = World(tmp_path, UploadPolicy(delay=1.0))

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.uploader.run)
            w.close_file(1, "tmpfile", b"x")
            w.sink.keys[1] = None
            assert await drained(w.uploader, 10)
            nursery.cancel_scope.cancel()

    run(main)
    assert w.store.stats.calls.get("put_file", 0) == 0 and w.inner.stored_keys() == []
    assert w.sink.commits == [] and w.journal.recover() == []


def test_failures_are_retried_with_back_off_until_everything_arrives(tmp_path: Path) -> None:
    w = World(tmp_path, UploadPolicy(retry_base=0.5, retry_max=4.0), fail_ratio=0.5)
    files = {f"f{i}": os.urandom(100 + i) for i in range(20)}

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.uploader.run)
            for i, (key, data) in enumerate(files.items()):
                w.close_file(i, key, data)
            assert await drained(w.uploader, 600)
            nursery.cancel_scope.cancel()

    run(main)
    assert {k: w.inner.data(k) for k in files} == files
    failures = w.store.stats.failures["put_file"]
    assert failures > 0
    assert w.gauge("cloudfs_writeback_retries_total") == failures
    assert len(w.sink.commits) == 20  # each file committed once


def test_drain_gives_up_after_its_timeout_and_keeps_the_entry(tmp_path: Path) -> None:
    w = World(tmp_path, UploadPolicy(retry_base=1.0, deadline=5.0), fail_ratio=1.0)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.uploader.run)
            w.close_file(1, "stuck", b"s")
            assert not await drained(w.uploader, 30)
            backlog = w.uploader.backlog()
            assert backlog.files == 1 and backlog.failures >= 3
            nursery.cancel_scope.cancel()

    run(main)
    assert [e.key for e in w.journal.recover()] == ["stuck"]  # still owed after a restart


def test_retry_now_ends_the_back_off_of_what_failed(tmp_path: Path) -> None:
    # As after a replay of journaled tree changes: what the uploads waited for is back.
    w = World(tmp_path, UploadPolicy(retry_base=60.0, retry_max=600.0), fail_ratio=1.0)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.uploader.run)
            w.close_file(1, "late", b"bytes")
            await trio.sleep(5)  # not drain(): it ends back-offs too
            assert w.uploader.backlog().failures == 1  # the next try is 30-90 s away
            w.store.configure(fail_ratio=0.0)
            w.uploader.retry_now()
            for _ in range(50):
                if w.sink.commits:
                    break
                await trio.sleep(0.1)
            assert w.sink.commits
            nursery.cancel_scope.cancel()

    run(main)
    assert w.inner.data("late") == b"bytes"


def test_a_rename_during_the_put_moves_the_object(tmp_path: Path) -> None:
    w = World(tmp_path, UploadPolicy())

    class Renaming(Sink):
        calls = 0

        async def key_of(self, inode: int) -> str | None:
            self.calls += 1
            return "old" if self.calls == 1 else "new"

    w.uploader = Uploader(
        w.journal, w.store, Renaming(), w.metrics, UploadPolicy(), trio.CapacityLimiter(2)
    )

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.uploader.run)
            w.close_file(1, "old", b"data")
            assert await drained(w.uploader, 10)
            nursery.cancel_scope.cancel()

    run(main)
    assert w.inner.stored_keys() == ["new"] and w.inner.data("new") == b"data"


def test_store_errors_do_not_escape(tmp_path: Path) -> None:
    w = World(tmp_path, UploadPolicy(retry_base=0.1))
    w.inner.failures["put_file"] = RemoteIOError("down")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.uploader.run)
            w.close_file(1, "k", b"v")
            assert not await drained(w.uploader, 5)
            del w.inner.failures["put_file"]
            assert await drained(w.uploader, 120)
            nursery.cancel_scope.cancel()

    run(main)
    assert w.inner.data("k") == b"v"


# -- the staging area's bound ---------------------------------------------------


def test_a_full_staging_area_makes_writers_wait_then_fail_with_enospc() -> None:
    space = StagingSpace(limit=100, wait=5.0)
    owed = [30]
    space.count_journal(lambda: owed[0])

    async def main() -> None:
        await space.reserve(50, "a")
        assert space.used == 80
        started = trio.current_time()
        with pytest.raises(NoSpace):
            await space.reserve(40, "b")
        assert trio.current_time() - started >= 5.0

        async def upload_finishes() -> None:
            await trio.sleep(2)
            owed[0] = 0

        async with trio.open_nursery() as nursery:
            nursery.start_soon(upload_finishes)
            await space.reserve(40, "c")  # backpressure: goes on once the upload is done
        assert space.used == 90
        space.release(90)
        assert space.used == 0

    run(main)


def test_an_unlink_drops_the_owed_bytes_at_once(tmp_path: Path) -> None:
    w = World(tmp_path, UploadPolicy(delay=60.0))

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.uploader.run)
            w.close_file(1, "gone", b"x")
            w.uploader.unlinked(1)
            assert w.uploader.pending(1) is None
            assert await drained(w.uploader, 10)
            await trio.sleep(1)
            nursery.cancel_scope.cancel()

    run(main)
    assert w.journal.recover() == [] and w.inner.stored_keys() == []


def test_a_recovered_entry_the_tree_lost_is_uploaded_under_its_old_name(tmp_path: Path) -> None:
    w = World(tmp_path, UploadPolicy())
    entry = w.journal.seal(9, "ckpt/last.pt", 4, 1, staged(tmp_path, "s", b"data"))
    # a new run: the tree (w.sink) does not know inode 9

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.uploader.run)
            w.uploader.submit(WriteJournal(str(tmp_path / "wb")).recover()[0], recovered=True)
            assert await drained(w.uploader, 10)
            nursery.cancel_scope.cancel()

    run(main)
    assert w.inner.data("ckpt/last.pt") == b"data" and entry.key == "ckpt/last.pt"


def test_a_rename_waits_for_the_files_put_in_flight_and_starts_none_of_its_own(
    tmp_path: Path,
) -> None:
    """The soak's third race: a put that read ``latest.tmp`` before the trainer renamed
    the file landed after the next checkpoint was put and committed as ``latest.tmp``,
    overwriting it. A rename holds its files' uploads: the put in flight ends first,
    and one due during the rename starts after it, under the new name."""
    events: list[str] = []
    gate, entered = threading.Event(), threading.Event()

    class Gated(MemoryObjectStore):
        def put_file(self, key: str, path: str, resume: str | None = None) -> ObjectInfo:
            events.append(f"put {key}")
            entered.set()
            gate.wait(10)
            return super().put_file(key, path, resume)

    w = World(tmp_path, UploadPolicy())
    w.inner = Gated()
    w.uploader = Uploader(
        w.journal, w.inner, w.sink, w.metrics, UploadPolicy(), trio.CapacityLimiter(4)
    )

    renamed = trio.Event()

    async def rename() -> None:
        async with w.uploader.held([1]):
            events.append("renamed")
            w.sink.keys[1] = "latest.bin"
            w.close_file(1, "latest.bin", b"rewritten")  # due now, held back until the end
        renamed.set()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(w.uploader.run)
            w.close_file(1, "latest.tmp", b"first")
            await trio.to_thread.run_sync(entered.wait, 10)
            nursery.start_soon(rename)
            await trio.sleep(5)
            assert events == ["put latest.tmp"]  # the rename waits for the put in flight
            gate.set()
            await renamed.wait()
            assert await drained(w.uploader, 10)
            nursery.cancel_scope.cancel()

    run(main)
    assert events == ["put latest.tmp", "renamed", "put latest.bin"]
    assert w.inner.data("latest.bin") == b"rewritten"
