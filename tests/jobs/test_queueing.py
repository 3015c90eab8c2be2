"""Quotas, priority and a scheduler restart, through a real scheduler."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cloudfs.jobs import procs, runner
from cloudfs.jobs.client import request
from tests.jobs.conftest import Sched, marked_pids

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def waiter(gate: Path, **extra: Any) -> dict[str, Any]:
    """A job that runs until ``gate`` exists."""
    return {"command": f"while [ ! -e {gate} ]; do sleep 0.05; done", **extra}


def wait_for_shims(attempt: Path, count: int) -> list[tuple[int, int]]:
    """The (pid, start time) of the attempt's ``count`` workers, once each has said."""
    deadline = time.monotonic() + 20
    while len(found := runner.roots(attempt)) < count:
        assert time.monotonic() < deadline, f"{attempt}: {found}"
        time.sleep(0.05)
    return found


def test_three_jobs_in_a_group_whose_quota_fits_two(sched_factory: Any, tmp_path: Path) -> None:
    s: Sched = sched_factory({"groups": {"vision": {"quota": {"gpus": 2}}}})
    gate = tmp_path / "go"
    res = {"count": 1, "resources": {"gpus": 1, "cpu": 1}}
    ids = [s.submit(name=f"j{i}", group="vision", workers=res, **waiter(gate)) for i in range(3)]
    s.wait(ids[0], "running")
    s.wait(ids[1], "running")
    assert s.wait_reason(ids[2]) == "group vision quota: gpus 2 in use + 1 asked > 2"
    report = s.ask({"op": "report"})["report"]
    assert report["groups"]["vision"]["requested"]["gpus"] == 3
    assert report["groups"]["vision"]["allocated"]["gpus"] == 2
    deadline = time.monotonic() + 20  # measured once the workers' shims said who they are
    while not all(j["used"].get("memory") for j in report["jobs"] if j["state"] == "running"):
        assert time.monotonic() < deadline, report["jobs"]
        time.sleep(0.1)
        report = s.ask({"op": "report"})["report"]
    gate.touch()
    for job_id in ids:
        s.wait(job_id, "succeeded")
    assert s.job(ids[2])["queued_seconds"] > 0


def test_priority_then_fifo(sched_factory: Any, tmp_path: Path) -> None:
    s: Sched = sched_factory({"groups": {"g": {"quota": {"jobs": 1}}}})
    gate = tmp_path / "go"
    blocker = s.submit(name="blocker", group="g", **waiter(gate))
    s.wait(blocker, "running")
    low = s.submit(name="low", group="g", command="true")
    high = s.submit(name="high", group="g", command="true", priority=5)
    high2 = s.submit(name="high2", group="g", command="true", priority=5)
    assert s.wait_reason(low).startswith("behind job")
    gate.touch()
    done = {j: s.wait(j, "succeeded")["started_at"] for j in (low, high, high2)}
    assert done[high] < done[high2] < done[low]


def test_a_restarted_scheduler_readopts_running_jobs(sched: Sched, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    job_id = sched.submit(name="survivor", workers=2, **waiter(gate))
    sched.wait(job_id, "running")
    attempt = sched.state / "jobs" / job_id / "attempt-1"
    shims = wait_for_shims(attempt, 2)
    sched.stop(signal.SIGKILL)  # killed, not stopped: nothing cleaned up
    assert all(procs.alive(pid, started) for pid, started in shims)  # the workers live on
    sched.start()
    assert sched.job(job_id)["state"] == "running"
    assert sched.events(job_id)[-1] == "re-adopted after a scheduler restart (2 live)"
    gate.touch()
    assert sched.wait(job_id, "succeeded")["exits"] == [[0, 0]]
    after = sched.submit(name="after", command="exit 4")
    assert sched.wait(after, "failed")["reason"] == "worker 0 exited with status 4"


def test_a_restarted_scheduler_learns_how_adopted_workers_ended(
    sched: Sched, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    job_id = sched.submit(name="ends-meanwhile", command=f"{waiter(gate)['command']}; exit 7")
    sched.wait(job_id, "running")
    sched.stop(signal.SIGKILL)
    gate.touch()  # the worker ends while no scheduler runs
    sched.start()
    assert sched.wait(job_id, "failed")["reason"] == "worker 0 exited with status 7"
    cancel_me = sched.submit(name="cancel-me", **waiter(tmp_path / "never"))
    sched.wait(cancel_me, "running")
    sched.stop(signal.SIGKILL)
    sched.start()
    assert sched.ask({"op": "cancel", "id": cancel_me})["job"]["state"] == "cancelled"
    assert not marked_pids(sched.marker)


def test_submit_starts_a_scheduler_when_none_runs(tmp_path: Path) -> None:
    state = tmp_path / "state"
    spec = tmp_path / "job.yaml"
    spec.write_text("name: auto\ncommand: [/bin/true]\n")
    cli = [sys.executable, "-m", "cloudfs.cli.main", "job"]
    where = ["--state-dir", str(state)]
    done = subprocess.run([*cli, "submit", str(spec), *where], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "auto-1"
    pid = request(state, {"op": "ping"})["pid"]
    try:
        listing = subprocess.run([*cli, "list", "--json", *where], capture_output=True,
                                 text=True, timeout=30)  # fmt: skip
        assert '"id": "auto-1"' in listing.stdout
    finally:
        os.kill(pid, signal.SIGTERM)
