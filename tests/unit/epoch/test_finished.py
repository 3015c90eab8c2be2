"""An ended job's series: kept with their final values, marked finished, for the grace.

``FinishedJobs`` on its own with explicit times, then a ``JobBoard`` under trio's
``MockClock`` (its reaper ticks every second of fake time): a job ends, its
series stay until the grace is over and go then; a job announced again within
the grace takes them back and they run on.
"""

from __future__ import annotations

from array import array
from typing import Any, cast

import trio
import trio.testing

from cloudfs.data.blocks import ObjectRef
from cloudfs.epoch.board import JobBoard, JobKey, Known, Window
from cloudfs.epoch.finished import FinishedJobs
from cloudfs.epoch.order import EpochOrder
from cloudfs.epoch.telemetry import JobTelemetry
from cloudfs.metrics import Metrics
from tests.unit.epoch.test_board import SIZE, FakeDisk, FakeReader

GRACE = 30.0


def _value(m: Metrics, name: str, job: str = "j", rank: int = 0) -> float | None:
    """The sample ``name{job, rank}``; None once the series is gone."""
    return m.registry.get_sample_value(name, {"job": job, "rank": str(rank)})


def _telemetry(m: Metrics, job: str) -> JobTelemetry:
    t = JobTelemetry(m, job, 0)
    t.announced(epoch=1, files=2, cached_bytes=0, total_bytes=2)
    t.read(10, held=False, waited=0.5, fetched_ahead=False)
    return t


def test_finished_jobs_keep_their_series_for_the_grace() -> None:
    m = Metrics()
    finished = FinishedJobs(grace=GRACE)
    finished.add("a", _telemetry(m, "a"), now=100.0)
    finished.add("b", _telemetry(m, "b"), now=110.0)
    assert _value(m, "cloudfs_job_finished", "a") == 1.0
    assert _value(m, "cloudfs_job_stall_seconds_total", "a") == 0.5
    assert finished.expire(129.9) == []
    assert finished.expire(130.0) == ["a"]
    assert _value(m, "cloudfs_job_finished", "a") is None
    assert _value(m, "cloudfs_job_stall_seconds_total", "a") is None
    assert _value(m, "cloudfs_job_stall_seconds_total", "b") == 0.5
    assert finished.take("b") and "b" not in finished
    assert finished.expire(1000.0) == [], "a job taken back is no longer expired"
    assert _value(m, "cloudfs_job_stall_seconds_total", "b") == 0.5
    assert not finished.take("nobody")


def test_no_grace_drops_the_series_at_once() -> None:
    m = Metrics()
    finished = FinishedJobs(grace=0.0)
    finished.add("a", _telemetry(m, "a"), now=5.0)
    assert len(finished) == 0
    assert _value(m, "cloudfs_job_read_bytes_total", "a") is None


def test_the_board_keeps_an_ended_jobs_series_for_the_grace() -> None:
    async def main() -> None:
        m = Metrics()
        disk = FakeDisk(capacity=2 * SIZE, held={"k1", "k2"})  # nothing to fetch ahead
        board = JobBoard(
            cast(Any, None), cast(Any, FakeReader()), cast(Any, disk), m, Window(),
            series_grace=GRACE,
        )  # fmt: skip
        known = {i: Known(ObjectRef(f"f{i + 1}", "e", SIZE), (f"k{i + 1}",)) for i in range(2)}

        def announce(epoch: int) -> Any:
            order = EpochOrder(array("q", [1, 2]), array("q", [SIZE, SIZE]))
            return board.announce(JobKey("j", 0), epoch, order, dict(known), cached_bytes=0)

        async with trio.open_nursery() as nursery:
            board.start(nursery)
            job = announce(1)
            board.read_started(1)
            board.read_done(1, SIZE, held=False, waited=0.5, eof=True)
            assert _value(m, "cloudfs_job_finished") == 0.0
            await trio.sleep(3)
            board.end(job)
            assert board.jobs() == []
            assert _value(m, "cloudfs_job_finished") == 1.0
            await trio.sleep(GRACE - 2)
            assert _value(m, "cloudfs_job_finished") == 1.0, "gone within the grace"
            assert _value(m, "cloudfs_job_stall_seconds_total") == 0.5
            assert _value(m, "cloudfs_job_read_files_total") == 1.0
            assert _value(m, "cloudfs_job_position_files") == 1.0
            await trio.sleep(3)  # past the grace, and the reaper's next tick
            assert _value(m, "cloudfs_job_finished") is None
            assert _value(m, "cloudfs_job_stall_seconds_total") is None

            job = announce(1)  # a new run: its series start afresh
            board.read_started(1)
            board.end(job)
            await trio.sleep(GRACE / 2)
            job = announce(2)  # back within the grace: its series are its own again
            assert _value(m, "cloudfs_job_finished") == 0.0
            assert _value(m, "cloudfs_job_epoch") == 2.0
            await trio.sleep(2 * GRACE)
            assert _value(m, "cloudfs_job_finished") == 0.0, "a running job's series went"
            board.read_started(1)
            assert _value(m, "cloudfs_job_read_files_total") == 2.0, "its counters run on"
            board.stop()  # unmount: every job ends
            assert _value(m, "cloudfs_job_finished") == 1.0
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
