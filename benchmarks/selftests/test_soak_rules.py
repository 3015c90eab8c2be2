"""The soak's rules, without running it: the fault schedule's scaling, which failures a
fault excuses, recovery times, and the memory flatness verdict."""

from __future__ import annotations

import itertools

import pytest

from benchmarks.bench.soak import faults, memory
from benchmarks.bench.soak.workload import Op


def test_the_schedule_fits_the_run_and_scales_the_outage() -> None:
    scaled = ((180.0, 30.0, 30.0), (600.0, 100.0, 100.0), (1800.0, 120.0, 300.0))
    for duration, outage, tree in scaled:
        windows, scaling = faults.plan(duration)
        assert [w.name for w in windows] == [f.name for f in faults.FAULTS]
        assert scaling["outage_s"] == outage and scaling["tree_outage_s"] == tree
        assert windows[0].planned_start == duration * faults.WARMUP_SHARE
        last = windows[-1]
        assert last.planned_start + last.planned_length <= duration * (1 - faults.TAIL_SHARE)
        for a, b in itertools.pairwise(windows):
            assert a.planned_start + a.planned_length <= b.planned_start  # one at a time
    assert "30 s in this shorter run" in faults.plan(180.0)[1]["note"]
    windows, _ = faults.plan(900.0, tree_outage=300.0)  # the 5-minute outage in 15 minutes
    assert next(w for w in windows if w.name == "tree_outage").planned_length == 300.0
    with pytest.raises(ValueError):
        faults.plan(180.0, tree_outage=300.0)  # does not fit


def _window(name: str, start: float, end: float) -> faults.Window:
    spec = next(f for f in faults.FAULTS if f.name == name)
    excuses = sorted(spec.excuses)
    return faults.Window(
        name, spec.what, start, end - start, excuses, spec.unknown_reads, start, end
    )


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
    windows = [_window("s3_outage", 10, 40), _window("tree_outage", 45, 55)]
    assert faults.excused_by(Op("read", "reader", 46, 47, "data/y", "EIO"), windows) == (
        "tree_outage"
    )


def test_a_tree_outage_excuses_reads_only_of_files_never_read_before_it() -> None:
    """Issue 27: a detached mount serves every file it knows; one it never read may fail;
    the write-back mount's checkpoints are journaled, so their failures are not excused."""
    windows = [_window("tree_outage", 100, 400)]
    ops = [
        _op("read", 50, 51, None),  # data/x read before the outage
        Op("read", "reader", 120, 121, "data/y", "EIO"),  # never read before
        _op("read", 130, 131),  # data/x again: known
        Op("rename", "writer", 140, 141, "ckpt/latest.bin", "EIO"),
    ]
    known = faults.first_reads(ops)
    assert faults.excused_by(ops[1], windows, known) == "tree_outage"
    assert faults.excused_by(ops[2], windows, known) is None
    assert faults.excused_by(ops[3], windows, known) is None


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
