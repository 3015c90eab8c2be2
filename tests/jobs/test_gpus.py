"""GPU devices and the machine's capacity, through a real scheduler. This machine
has no GPUs: the config declares four, and the workers print the indices they
were given."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cloudfs.jobs.devices import assign
from tests.jobs.conftest import Sched

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
FOUR_GPUS = {"machine": {"gpus": 4, "cpus": 16}}  # CPUs: this machine has two cores


def gpu_job(name: str, gate: Path, workers: int, gpus: int) -> dict[str, Any]:
    say = 'echo "cuda=$CUDA_VISIBLE_DEVICES nvidia=$NVIDIA_VISIBLE_DEVICES"'
    return {"name": name, "workers": {"count": workers, "resources": {"gpus": gpus}},
            "command": f"{say}; while [ ! -e {gate} ]; do sleep 0.05; done"}  # fmt: skip


def visible(s: Sched, job_id: str, workers: int, attempt: int = 1) -> list[str]:
    """Each worker's CUDA_VISIBLE_DEVICES, from its log (NVIDIA_VISIBLE_DEVICES alike)."""
    directory = s.state / "jobs" / job_id / f"attempt-{attempt}"
    deadline = time.monotonic() + 20
    found: list[str] = []
    while len(found) < workers:
        assert time.monotonic() < deadline, found
        time.sleep(0.05)
        found = []
        for rank in range(workers):
            log = directory / f"worker-{rank}.log"
            text = log.read_text() if log.exists() else ""
            if "cuda=" in text:
                cuda, nvidia = text.split()[:2]
                assert nvidia == "nvidia=" + cuda.removeprefix("cuda=")
                found.append(cuda.removeprefix("cuda="))
    return found


def test_disjoint_devices_and_a_job_waiting_for_the_machine(
    sched_factory: Any, tmp_path: Path
) -> None:
    s: Sched = sched_factory(FOUR_GPUS)
    gates = [tmp_path / f"go-{i}" for i in range(3)]
    pair = s.submit(**gpu_job("pair", gates[0], workers=2, gpus=1))
    double = s.submit(**gpu_job("double", gates[1], workers=1, gpus=2))
    s.wait(pair, "running")
    s.wait(double, "running")
    given = visible(s, pair, 2) + visible(s, double, 1)
    sets = [set(v.split(",")) for v in given]
    assert sorted(i for v in sets for i in v) == ["0", "1", "2", "3"]  # disjoint, all four
    assert s.job(pair)["devices"] == [[int(v)] for v in given[:2]]
    late = s.submit(**gpu_job("late", gates[2], workers=1, gpus=1))
    assert s.wait_reason(late) == "waiting for 1 GPUs on this machine (0 free)"
    report = s.ask({"op": "report"})["report"]["machine"]
    assert report["capacity"]["gpus"] == 4 and report["allocated"]["gpus"] == 4
    assert sorted(report["devices"]) == sorted([pair, double])
    gates[0].touch()  # pair ends: its two GPUs are free again
    assert s.wait(pair, "succeeded")["devices"] == []
    s.wait(late, "running")
    assert visible(s, late, 1)[0] in given[:2]
    status = subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "job", "status", late,
         "--state-dir", str(s.state)], capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert f"worker 0: GPUs {visible(s, late, 1)[0]}" in status.stdout, status.stdout
    text = subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "job", "report", "--state-dir", str(s.state)],
        capture_output=True, text=True, timeout=30,
    ).stdout  # fmt: skip
    assert text.startswith("machine: GPUs 3/4, CPUs 2/16,"), text
    assert f"  {double}: GPUs {given[2]}" in text
    for gate in gates[1:]:
        gate.touch()
    s.wait(double, "succeeded")
    s.wait(late, "succeeded")


def test_a_job_larger_than_the_machine_waits_and_blocks_nobody(
    sched_factory: Any, tmp_path: Path
) -> None:
    s: Sched = sched_factory(FOUR_GPUS)
    huge = s.submit(**gpu_job("huge", tmp_path / "never", workers=2, gpus=4))
    small = s.submit(name="small", command="true")
    assert s.wait_reason(huge) == "more than this machine has: 8 GPUs asked, the machine has 4"
    s.wait(small, "succeeded")
    assert s.job(huge)["state"] == "queued"


def test_a_failed_attempt_gives_its_devices_back_before_the_retry(sched_factory: Any) -> None:
    s: Sched = sched_factory({"machine": {"gpus": 2, "cpus": 16}})
    job_id = s.submit(name="flaky", workers={"count": 1, "resources": {"gpus": 2}},
                      command='[ "$CLOUDFS_JOB_ATTEMPT" = 2 ]', retries=1)  # fmt: skip
    done = s.wait(job_id, "succeeded")
    assert done["attempt"] == 2 and done["devices"] == []
    assert [m for m in s.events(job_id) if "on GPUs" in m] == [
        "starting attempt 1 on GPUs 0,1", "starting attempt 2 on GPUs 0,1"]  # fmt: skip


def test_a_restarted_scheduler_keeps_the_devices_of_readopted_jobs(
    sched_factory: Any, tmp_path: Path
) -> None:
    s: Sched = sched_factory({"machine": {"gpus": 2, "cpus": 16}})
    first = s.submit(**gpu_job("first", tmp_path / "go-1", workers=1, gpus=1))
    s.wait(first, "running")
    assert visible(s, first, 1) == ["0"]
    s.stop(signal.SIGKILL)  # its worker lives on, holding GPU 0
    s.start()
    assert s.job(first)["state"] == "running"
    assert s.job(first)["devices"] == [[0]]
    second = s.submit(**gpu_job("second", tmp_path / "go-2", workers=1, gpus=1))
    s.wait(second, "running")
    assert visible(s, second, 1) == ["1"]  # not GPU 0, which the re-adopted job holds
    third = s.submit(**gpu_job("third", tmp_path / "go-3", workers=1, gpus=1))
    assert s.wait_reason(third) == "waiting for 1 GPUs on this machine (0 free)"
    for name in ("go-1", "go-2", "go-3"):
        (tmp_path / name).touch()
    for job_id in (first, second, third):
        s.wait(job_id, "succeeded")


def test_assign_hands_out_the_lowest_free_indices_disjointly() -> None:
    assert assign(2, 2, [], 4) == [[0, 1], [2, 3]]
    assert assign(2, 1, [0, 2], 4) == [[1], [3]]
    assert assign(3, 0, [], 0) == []
    with pytest.raises(LookupError):
        assign(1, 2, [1, 2, 3], 4)
