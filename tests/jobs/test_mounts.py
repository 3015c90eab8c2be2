"""Jobs whose data is on a CloudFS mount the scheduler makes: warm-up to the
threshold, cancel during warm-up, a missing dataset, and a two-worker
``torchrun`` job reading the mount (real torch, CPU, gloo)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.jobs.conftest import MiB, Sched, marked_pids, run_training_job, volume

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.timeout(300)]


TRAIN = textwrap.dedent(
    """
    import os, sys, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    files = sorted(os.listdir(sys.argv[1]))[rank::world]
    total = torch.tensor([0], dtype=torch.int64)
    for name in files:
        with open(os.path.join(sys.argv[1], name), "rb") as f:
            total += sum(f.read())
    dist.all_reduce(total)
    if rank == 0:
        with open(sys.argv[2], "w") as out:
            out.write(f"{world} {total.item()} {os.environ['CLOUDFS_JOB']}")
    dist.destroy_process_group()
    """
)


def test_a_two_worker_torchrun_job_reads_a_mount(
    sched: Sched, data: tuple[Path, Path], tmp_path: Path
) -> None:
    job, result, _ = run_training_job(
        sched, data, tmp_path, TRAIN, name="ddp", framework="torchrun", workers=2
    )
    assert result == f"2 {sum(i * MiB for i in range(8))} {job['id']}"
    assert job["warmup"]["cached_bytes"] >= 0.8 * 8 * MiB
    assert "admitted: making its data ready" in sched.events(job["id"])


def test_cancel_during_warm_up(sched: Sched, data: tuple[Path, Path]) -> None:
    ufs, mnt = data
    job_id = sched.submit(
        name="never-ready", command="sleep 600",
        volumes=[volume(ufs, mnt, "--cache-size", "1M", "--memory-cache-size", "1M")],
        datasets=[str(mnt / "train")], readiness={"min_cached": 0.9},
    )  # fmt: skip
    sched.wait(job_id, "warming")
    for _ in range(200):  # the status shows the progress once it is measured
        if sched.job(job_id)["warmup"].get("bytes") == 8 * MiB:
            break
        subprocess.run(["sleep", "0.1"])
    assert sched.job(job_id)["warmup"]["target"] == 0.9 * 8 * MiB
    listing = subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "job", "list", "--state-dir", str(sched.state)],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert "warming: 0% of 8.0 MiB cached, needs 90%" in listing.stdout
    job = sched.ask({"op": "cancel", "id": job_id})["job"]
    assert job["state"] == "cancelled"
    assert job["attempt"] == 0  # no worker ever started
    assert not marked_pids(sched.marker)


def test_a_missing_dataset_fails_the_job(sched: Sched, data: tuple[Path, Path]) -> None:
    ufs, mnt = data
    job_id = sched.submit(
        name="no-data", command="true", volumes=[volume(ufs, mnt)],
        datasets=[str(mnt / "nope")], readiness={"min_cached": 0.5},
    )  # fmt: skip
    job = sched.wait(job_id, "failed", timeout=60)
    assert job["reason"] == f"data not ready: dataset path {mnt}/nope does not exist"
