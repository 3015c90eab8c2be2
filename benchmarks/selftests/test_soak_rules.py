"""The soak's rules, without running it: the fault schedule's scaling, which failures a
fault excuses, recovery times, and the memory flatness verdict."""

from __future__ import annotations

import itertools

from benchmarks.bench.soak import faults, memory
from benchmarks.bench.soak.workload import Op


def test_the_schedule_fits_the_run_and_scales_the_outage() -> None:
    for duration, outage in ((180.0, 30.0), (600.0, 100.0), (1800.0, 120.0)):
        windows, scaling = faults.plan(duration)
        assert [w.name for w in windows] == [f.name for f in faults.FAULTS]
        assert scaling["outage_s"] == outage
        assert windows[0].planned_start == duration * faults.WARMUP_SHARE
        last = windows[-1]
        assert last.planned_start + last.planned_length <= duration * (1 - faults.TAIL_SHARE)
        for a, b in itertools.pairwise(windows):
            assert a.planned_start + a.planned_length <= b.planned_start  # one at a time
    assert "30 s in this shorter run" in faults.plan(180.0)[1]["note"]


def _window(name: str, start: float, end: float) -> faults.Window:
    spec = next(f for f in faults.FAULTS if f.name == name)
    return faults.Window(name, spec.what, start, end - start, sorted(spec.excuses), start, end)


def _op(kind: str, start: float, end: float, error: str | None = "EIO", **kw: bool) -> Op:
    return Op(kind, "reader", start, end, "data/x", error, **kw)


def test_a_failure_is_allowed_only_by_a_fault_that_excuses_its_kind() -> None:
    windows = [_window("s3_outage", 10, 40), _window("etcd_member_kill", 100, 110)]
    assert faults.excused_by(_op("read", 20, 22), windows) == "s3_outage"
    assert faults.excused_by(_op("read", 50, 52), windows) == "s3_outage"  # within the grace
    assert faults.excused_by(_op("read", 60, 62), windows) is None  # long after
    assert faults.excused_by(_op("write", 20, 22), windows) is None  # write-back absorbs it
    assert faults.excused_by(_op("read", 101, 102), windows) is None  # quorum stays
    mismatch = _op("read", 20, 22, "checksum mismatch", checksum_mismatch=True)
    assert faults.excused_by(mismatch, windows) is None


def test_an_overlapped_window_is_blamed_before_one_in_its_grace() -> None:
    windows = [_window("s3_outage", 10, 40), _window("tree_server_kill", 45, 55)]
    assert faults.excused_by(_op("read", 46, 47), windows) == "tree_server_kill"


def test_recovery_is_the_first_success_started_after_the_fault() -> None:
    windows = [_window("s3_outage", 10, 40)]
    ops = [
        _op("read", 35, 41, None),  # began inside: does not count
        _op("read", 40.5, 41, "EIO"),
        _op("read", 41, 43, None),
        Op("write", "writer", 42, 44.5, "ckpt/a", None),
    ]
    assert faults.recovery(windows, ops) == {"s3_outage": {"read@reader": 3.0, "write@writer": 4.5}}
    assert faults.recovery(windows, ops[:2]) == {"s3_outage": {"read@reader": None}}


def _samples(rss: list[float], fds: int = 100) -> list[memory.Sample]:
    return [memory.Sample(float(t), r, fds) for t, r in enumerate(rss)]


def test_flatness_allows_noise_and_catches_growth() -> None:
    flat = memory.flatness(_samples([140, 150, 138, 145, 141, 149, 143, 139, 150]), after=0)
    assert flat["flat"], flat
    growing = memory.flatness(_samples([100 + 15 * i for i in range(12)]), after=0)
    assert not growing["flat"] and not growing["rss_flat"], growing
    leaking = [memory.Sample(float(t), 140, 100 + 10 * t) for t in range(12)]
    assert not memory.flatness(leaking, after=0)["fds_flat"]
    assert not memory.flatness(_samples([140] * 10), after=8)["flat"]  # too few samples
