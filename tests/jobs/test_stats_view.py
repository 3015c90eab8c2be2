"""``cloudfs stats --scheduler`` against a real scheduler, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.jobs.conftest import Sched
from tests.jobs.test_queueing import waiter

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def stats(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "stats", *argv],
        capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def test_one_running_one_queued_in_a_group_that_fits_one(
    sched_factory: Any, tmp_path: Path
) -> None:
    s: Sched = sched_factory({"groups": {"vision": {"quota": {"gpus": 1}}}})
    gate = tmp_path / "go"
    res = {"count": 1, "resources": {"gpus": 1, "cpu": 1}}
    first = s.submit(name="first", group="vision", workers=res, **waiter(gate))
    second = s.submit(name="second", group="vision", workers=res, **waiter(gate))
    s.wait(first, "running")
    reason = s.wait_reason(second)

    done = stats("--scheduler", "--state-dir", str(s.state), "--json")
    assert done.returncode == 0, done.stderr
    snap = json.loads(done.stdout)
    group = snap["groups"]["vision"]
    assert (group["running"], group["queued"]) == (1, 1)
    assert group["used"]["gpus"] == 1 and group["quota"]["gpus"] == 1
    jobs = {j["id"]: j for j in snap["jobs"]}
    assert jobs[first]["state"] == "running" and jobs[first]["running_seconds"] >= 0
    assert jobs[second]["state"] == "queued"
    assert jobs[second]["reason"] == reason == "group vision quota: gpus 1 in use + 1 asked > 1"

    done = stats("--scheduler", "--state-dir", str(s.state), "--count", "1", "--interval", "0.1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.split()[:4] == ["vision", "1", "0", "1"] for line in lines), done.stdout
    assert any(line.startswith(f"  {first} ") and "running" in line for line in lines)
    assert any(line.startswith(f"  {second} ") and line.endswith(reason) for line in lines)
    gate.touch()


def test_no_scheduler_is_a_one_line_error(tmp_path: Path) -> None:
    done = stats("--scheduler", "--state-dir", str(tmp_path), "--json")
    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr == (
        f"cloudfs: no scheduler at {tmp_path} "
        "(start one: cloudfs job submit, or cloudfs scheduler serve)\n"
    )
