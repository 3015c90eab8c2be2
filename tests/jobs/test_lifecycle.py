"""A job's life through a real scheduler: success, failure, retries, hangs, cancel."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.jobs.conftest import Sched, marked_pids

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_a_two_worker_job_gets_ranks_and_succeeds(sched: Sched) -> None:
    job_id = sched.submit(
        name="hello", workers=2, command='echo "rank $RANK/$WORLD_SIZE $CLOUDFS_JOB"'
    )
    job = sched.wait(job_id, "succeeded")
    assert job["exits"] == [[0, 0]]
    logs = sched.ask({"op": "logs", "id": job_id})["files"]
    text = "".join(Path(f).read_text() for f in logs)
    assert f"rank 0/2 {job_id}" in text and f"rank 1/2 {job_id}" in text
    assert sched.events(job_id)[0].startswith("submitted by")


def test_exit_codes_map_to_states_and_retries_back_off(sched: Sched) -> None:
    failing = sched.submit(name="fails", command="exit 3", retries=1)
    job = sched.wait(failing, "failed")
    assert job["attempt"] == 2
    assert job["reason"] == "worker 0 exited with status 3 after 2 attempts"
    assert any(
        e.startswith("attempt 1: worker 0 exited with status 3; retry in")
        for e in sched.events(failing)
    )
    crash = sched.submit(name="crash", command="kill -9 $$")
    assert sched.wait(crash, "failed")["reason"] == "worker 0 killed by SIGKILL"


def test_a_crashed_rank_stops_the_others_and_a_hang_is_stopped(sched: Sched) -> None:
    gang = sched.submit(name="gang", workers=2, command='[ "$RANK" = 1 ] && exit 5; sleep 600')
    job = sched.wait(gang, "failed")
    assert job["reason"] == "worker 1 exited with status 5"
    hang = sched.submit(name="hang", command="sleep 600", max_runtime=1)
    assert sched.wait(hang, "failed")["reason"].startswith("ran past max_runtime (1 s)")
    assert not marked_pids(sched.marker)


def test_cancel_stops_every_worker(sched: Sched) -> None:
    job_id = sched.submit(name="long", workers=2, command="sleep 600 & sleep 600; wait")
    sched.wait(job_id, "running")
    # wait for the grandchildren to exist (the shell's background sleep)
    for _ in range(100):
        if len(marked_pids(sched.marker)) >= 6:
            break
        subprocess.run(["sleep", "0.05"])
    assert sched.ask({"op": "cancel", "id": job_id})["job"]["state"] == "cancelled"
    assert not marked_pids(sched.marker)
    assert sched.events(job_id)[-1] == "cancelled: cancelled: every worker stopped"


def test_bad_input_is_refused_with_one_line(sched: Sched, tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\ncommand: [/bin/true]\nworkers: {resources: {gpus: -1}}\n")
    cli = [sys.executable, "-m", "cloudfs.cli.main", "job", "submit", str(spec),
           "--state-dir", str(sched.state)]  # fmt: skip
    done = subprocess.run(cli, capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert done.stderr == "cloudfs: workers.resources.gpus: must be a whole number ≥ 0\n"
    spec.write_text("name: x\ncommand: [/bin/true]\ngroup: nope\n")
    done = subprocess.run(cli, capture_output=True, text=True, timeout=30)
    assert done.stderr == "cloudfs: group: unknown group 'nope' (known: default)\n"
    spec.write_text("name: x\ncommand: [/bin/true]\nvolumes: [{mount: /nonexistent/mnt}]\n")
    done = subprocess.run(cli, capture_output=True, text=True, timeout=30)
    job_id = done.stdout.strip()
    job = sched.wait(job_id, "failed")
    assert (
        job["reason"]
        == "data not ready: volumes[0]: no CloudFS mount at /nonexistent/mnt, and no uri to mount"
    )
    status = subprocess.run(
        [*cli[:4], "status", "nope-9", *cli[-2:]], capture_output=True, text=True, timeout=30
    )
    assert (status.returncode, status.stderr) == (1, "cloudfs: no job nope-9\n")


def test_the_cli_commands(sched: Sched, tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "cloudfs.cli.main", "job", *args]
        where = ["--state-dir", str(sched.state)]
        return subprocess.run([*command, *where], capture_output=True, text=True, timeout=60)

    spec = tmp_path / "job.yaml"
    spec.write_text(
        f"name: talk\ncommand: 'for i in 1 2 3; do echo line $i; sleep 0.2; done'\n"
        f"env: {{CLOUDFS_TEST_MARK: {sched.marker}}}\n"
    )
    job_id = cli("submit", str(spec)).stdout.strip()
    follow = cli("logs", job_id, "-f")
    assert follow.returncode == 0 and follow.stdout == "line 1\nline 2\nline 3\n"
    sched.wait(job_id, "succeeded")
    listing = cli("list")
    assert listing.stdout.splitlines()[0].split() == [
        "ID", "GROUP", "USER", "STATE", "PRIO", "ATTEMPT", "REASON",
    ]  # fmt: skip
    assert f"{job_id}  default" in listing.stdout
    status = cli("status", job_id)
    assert status.stdout.startswith(f"{job_id}: succeeded (every worker exited 0 (attempt 1))")
    report = cli("report")
    assert report.returncode == 0 and "GPUS req/alloc/quota" in report.stdout
    again = cli("cancel", job_id)
    assert (again.returncode, again.stderr) == (1, f"cloudfs: job {job_id} already succeeded\n")
