"""JobBoard's bookkeeping along one read: when a file's ranks and disk room go back.

A read of an announced file must keep its blocks ranked (so the disk tier does
not pick them as victims) and its room taken (so the prefetch does not fill
it) until the read has reached the file's end; a read that never gets there
settles once enough later reads pile up.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import trio
import trio.testing

from cloudfs.cache.belady import NOT_NEEDED
from cloudfs.data.blocks import ObjectRef
from cloudfs.epoch import board as board_mod
from cloudfs.epoch.board import JobBoard, JobKey, Known, Window
from cloudfs.epoch.order import EpochOrder
from cloudfs.metrics import Metrics

SIZE = 1000


@dataclass
class _Stats:
    capacity_bytes: int


@dataclass
class FakeDisk:
    """The three calls the board makes on the disk tier, over a set of held keys."""

    capacity: int
    held: set[str] = field(default_factory=set)
    reranked_keys: list[str] = field(default_factory=list)

    def stats(self) -> _Stats:
        return _Stats(self.capacity)

    def contains(self, key: str) -> bool:
        return key in self.held

    def set_ranker(self, ranker: object) -> None:
        pass

    def reranked(self, keys: Iterable[str]) -> None:
        self.reranked_keys.extend(keys)


def _board(disk: FakeDisk, files: int) -> tuple[JobBoard, Any]:
    board = JobBoard(cast(Any, None), cast(Any, None), cast(Any, disk), Metrics(), Window())
    order = EpochOrder(array("q", range(1, files + 1)), array("q", [SIZE] * files))
    known = {i: Known(ObjectRef(f"f{i + 1}", "e", SIZE), (f"k{i + 1}",)) for i in range(files)}
    disk.held = {f"k{i + 1}" for i in range(files)}  # all cached before the epoch
    job = board.announce(JobKey("j", 0), 1, order, known, cached_bytes=files * SIZE)
    return board, job


def test_a_file_keeps_its_rank_and_room_until_its_read_reaches_the_end() -> None:
    async def main() -> None:
        disk = FakeDisk(capacity=4 * SIZE)
        board, job = _board(disk, 4)
        assert board.rank("k1") == 0 and job.spare == 0

        board.read_started(1)
        assert board.rank("k1") == 0, "evictable while its read loads it"
        assert job.spare == 0, "its room handed to the prefetch while still being read"

        board.read_done(1, SIZE // 2, held=True, waited=0.0, eof=False)
        assert board.rank("k1") == 0 and job.spare == 0

        board.read_done(1, SIZE // 2, held=True, waited=0.0, eof=True)
        assert board.rank("k1") == NOT_NEEDED
        assert job.spare == SIZE
        assert "k1" in disk.reranked_keys
        assert board.rank("k2") == 1

    trio.run(main)


def test_reads_that_never_reach_the_end_settle_oldest_first(monkeypatch: Any) -> None:
    monkeypatch.setattr(board_mod, "READING_MAX", 2)

    async def main() -> None:
        board, job = _board(FakeDisk(capacity=4 * SIZE), 4)
        for inode in (1, 2, 3):
            board.read_started(inode)  # header reads only: no read reaches the end
        assert board.rank("k1") == NOT_NEEDED, "the oldest partial read settled"
        assert board.rank("k2") == 1 and board.rank("k3") == 2
        assert sorted(job.reading) == [1, 2]
        assert job.spare == SIZE

    trio.run(main)


def test_a_file_passed_over_unread_settles_at_once() -> None:
    async def main() -> None:
        board, job = _board(FakeDisk(capacity=3 * SIZE), 3000)
        spare = job.spare
        board.read_started(3000)  # far ahead: everything more than SKIP_TOLERANCE behind
        skipped = job.order.position
        assert skipped > 0
        assert board.rank("k1") == NOT_NEEDED
        assert job.spare - spare == skipped * SIZE

    trio.run(main)


@dataclass
class FakeReader:
    """Records the prefetch's fetches; each stays in flight until released."""

    fetched: list[str] = field(default_factory=list)
    release: trio.Event = field(default_factory=trio.Event)

    async def prefetch_whole(self, ref: ObjectRef) -> int:
        self.fetched.append(ref.key)
        await self.release.wait()
        return ref.size


def test_the_window_counts_files_fetched_not_places_and_memory_in_flight() -> None:
    """Cached files cost the window nothing: with the first 6 places cached and a
    window of 2 files, the prefetch reaches places 7 and 8 before any read. With a
    disk tier, the bytes bound holds fetches in flight only, not files fetched."""

    async def main() -> None:
        files = 12
        disk = FakeDisk(capacity=files * SIZE)
        reader = FakeReader()
        window = Window(files=2, bytes=2 * SIZE, parallel=8)
        board = JobBoard(cast(Any, None), cast(Any, reader), cast(Any, disk), Metrics(), window)
        order = EpochOrder(array("q", range(1, files + 1)), array("q", [SIZE] * files))
        known = {i: Known(ObjectRef(f"f{i + 1}", "e", SIZE), (f"k{i + 1}",)) for i in range(files)}
        disk.held = {f"k{i + 1}" for i in range(6)}
        async with trio.open_nursery() as nursery:
            board.start(nursery)
            job = board.announce(JobKey("j", 0), 1, order, known, cached_bytes=6 * SIZE)
            await trio.testing.wait_all_tasks_blocked()
            assert reader.fetched == ["f7", "f8"]
            assert job.flight_bytes == 2 * SIZE

            reader.release.set()  # both land on disk: no memory held, but 2 files ahead
            await trio.testing.wait_all_tasks_blocked()
            assert job.flight_bytes == 0 and job.ahead_files == 2
            assert reader.fetched == ["f7", "f8"], "the files window is full"

            reader.release = trio.Event()
            board.read_started(7)  # one read frees one place of the files window
            await trio.testing.wait_all_tasks_blocked()
            assert reader.fetched == ["f7", "f8", "f9"]
            reader.release.set()
            board.stop()
            nursery.cancel_scope.cancel()

    trio.run(main)
