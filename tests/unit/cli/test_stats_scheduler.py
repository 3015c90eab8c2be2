"""The scheduler view of ``cloudfs stats``, from fixed ``list`` and ``report`` answers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from cloudfs.cli import stats, stats_scheduler
from cloudfs.cli.main import build_parser
from cloudfs.cli.stats_scheduler import build_snapshot, format_duration, format_readiness, render
from cloudfs.errors import StartupError, UsageError

NOW = 10_000.0
GiB = 1 << 30


def _job(job_id: str, state: str, group: str = "vision", **extra: Any) -> dict[str, Any]:
    spec = {"name": job_id.rsplit("-", 1)[0], "group": group, "user": "ana", "priority": 0,
            "volumes": [{"mount": "/mnt/data"}]}  # fmt: skip
    spec.update(extra.pop("spec", {}))
    return {"id": job_id, "name": spec["name"], "seq": int(job_id.rsplit("-", 1)[1]),
            "spec": spec, "state": state, "reason": "", "warmup": {}, "attempt_started_at": 0.0,
            "stall_seconds": 0.0, **extra}  # fmt: skip


JOBS = [
    _job("done-1", "succeeded"),
    _job("train-2", "running", attempt_started_at=NOW - 125.0, stall_seconds=3.25),
    _job(
        "eval-3",
        "warming",
        warmup={"bytes": 100 * GiB, "cached_bytes": 63 * GiB, "target": 80 * GiB},
    ),
    _job(
        "big-4",
        "queued",
        spec={"priority": 5},
        reason="group vision quota: gpus 2 in use + 1 asked > 2",
    ),
    _job("plain-5", "running", group="nlp", spec={"volumes": []}, attempt_started_at=NOW - 4000),
]
REPORT = {
    "groups": {
        "vision": {
            "jobs": {"succeeded": 1, "running": 1, "warming": 1, "queued": 1},
            "allocated": {"gpus": 2.0, "cpus": 4.0, "memory": 8.0 * GiB, "jobs": 2.0},
            "quota": {"gpus": 2.0, "cpus": None, "memory": None, "jobs": None},
        },
        "nlp": {
            "jobs": {"running": 1},
            "allocated": {"gpus": 3.0, "cpus": 1.0, "memory": 0.0, "jobs": 1.0},
            "quota": {"gpus": 1.0, "cpus": 8.0, "memory": 16.0 * GiB, "jobs": 2.0},
        },
    },
    "jobs": [{"id": "big-4", "queued_seconds": 42.0}, {"id": "train-2", "queued_seconds": 1.5}],
}


@pytest.fixture
def snap() -> dict[str, Any]:
    return build_snapshot(JOBS, REPORT, NOW, "/var/lib/sched")


def test_groups_count_their_queue_and_quota_use(snap: dict[str, Any]) -> None:
    vision, nlp = snap["groups"]["vision"], snap["groups"]["nlp"]
    assert (vision["running"], vision["warming"], vision["queued"], vision["finished"]) == (
        1, 1, 1, 1,
    )  # fmt: skip
    assert vision["used"]["gpus"] == 2.0 and vision["quota"]["cpus"] is None
    assert vision["borrowed"] == {}
    assert nlp["borrowed"] == {"gpus": 2.0}
    assert list(snap["groups"]) == ["nlp", "vision"]


def test_jobs_leave_out_finished_ones_and_sort_running_first(snap: dict[str, Any]) -> None:
    assert [j["id"] for j in snap["jobs"]] == ["plain-5", "train-2", "eval-3", "big-4"]
    by_id = {j["id"]: j for j in snap["jobs"]}
    assert by_id["train-2"]["running_seconds"] == 125.0
    assert by_id["train-2"]["readiness"] == {"state": "ready"}
    assert by_id["plain-5"]["readiness"] is None  # no volumes: nothing to warm
    assert by_id["eval-3"]["readiness"]["cached_ratio"] == pytest.approx(0.63)
    assert by_id["big-4"]["queued_seconds"] == 42.0
    assert by_id["big-4"]["running_seconds"] is None
    assert by_id["big-4"]["reason"].startswith("group vision quota")
    assert by_id["big-4"]["priority"] == 5


def test_readiness_and_durations_read_short() -> None:
    warming = {"state": "warming", "cached_ratio": 0.634, "target_ratio": 0.8}
    assert format_readiness(warming) == "warming 63% (≥80%)"
    assert format_readiness({"state": "warming", "cached_ratio": None}) == "warming"
    assert format_readiness({"state": "ready"}) == "ready"
    assert format_readiness(None) == "—"
    assert [format_duration(s) for s in (None, 0.4, 42, 185, 7440)] == [
        "—", "0s", "42s", "3m05s", "2h04m",
    ]  # fmt: skip


def test_render_shows_group_lines_then_jobs_with_why_they_wait(snap: dict[str, Any]) -> None:
    lines = render(snap)
    assert lines[0] == "CloudFS scheduler /var/lib/sched"
    group = next(line for line in lines if line.startswith("  vision"))
    cells = ["vision", "1", "1", "1", "1", "2/2", "4/—", "8.0", "GiB/—", "2/—", "—"]
    assert group.split() == cells
    nlp = next(line for line in lines if line.startswith("  nlp"))
    assert nlp.endswith("gpus 2")
    header = next(line for line in lines if line.startswith("Job"))
    assert header.endswith("waiting for")
    big = next(line for line in lines if line.startswith("  big-4"))
    assert "42s" in big and big.endswith("group vision quota: gpus 2 in use + 1 asked > 2")
    assert "warming 63% (≥80%)" in next(line for line in lines if line.startswith("  eval-3"))
    train = next(line for line in lines if line.startswith("  train-2"))
    assert train.split()[5:] == ["0", "ready", "1s", "2m05s", "3s"]
    assert not any(line.startswith("  done-1") for line in lines)


def test_render_without_jobs_or_groups_says_so() -> None:
    lines = render(build_snapshot([], {"groups": {}, "jobs": []}, NOW, "/s"))
    assert lines == ["CloudFS scheduler /s", "Group   (no groups configured)",
                     "Jobs    (none queued or running)"]  # fmt: skip


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["stats", *argv])


@pytest.mark.parametrize(
    "argv", [("/mnt/data", "--scheduler"), ("/mnt/data", "--state-dir", "/s"), ()]
)
def test_target_and_scheduler_are_one_or_the_other(argv: tuple[str, ...]) -> None:
    with pytest.raises(UsageError):
        stats.run(_args(*argv))


def test_no_scheduler_is_one_line_naming_the_directory(tmp_path: Path) -> None:
    with pytest.raises(StartupError) as e:
        stats_scheduler.fetch(tmp_path / "none")
    assert str(e.value) == (
        f"no scheduler at {tmp_path / 'none'} "
        "(start one: cloudfs job submit, or cloudfs scheduler serve)"
    )


def test_the_live_view_shows_the_first_snapshot_at_once_then_refreshes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    taken: list[Path] = []

    def fake_fetch(state_dir: Path) -> dict[str, Any]:
        taken.append(state_dir)
        return build_snapshot(JOBS, REPORT, NOW, str(state_dir))

    monkeypatch.setattr(stats_scheduler, "fetch", fake_fetch)
    argv = ("--scheduler", "--state-dir", "/s", "--count", "2", "--interval", "0.01")
    assert stats.run(_args(*argv)) == 0
    blocks = capsys.readouterr().out.rstrip("\n").split("\n\n")
    assert len(blocks) == 2 and all(b.startswith("CloudFS scheduler /s") for b in blocks)
    assert taken == [Path("/s"), Path("/s")]  # the first snapshot is shown, not taken twice
