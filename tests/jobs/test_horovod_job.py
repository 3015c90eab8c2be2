"""A two-worker ``framework: horovod`` job reading a CloudFS mount the scheduler
makes: launched through ``horovodrun`` (Gloo, CPU), its ranks read their share of
the files, sum the bytes with ``hvd.allreduce`` and rank 0 writes the result; and
a cancelled horovod job leaves none of its ranks behind.

Horovod publishes no wheels: it builds from source against the installed torch
(0.28.1, the last release, sets C++14 and torch >= 2.1 needs C++17: its
CMakeLists must be patched), so the tests skip where ``horovod`` cannot be
imported."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.jobs.conftest import MiB, Sched, marked_pids, run_training_job

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

pytest.importorskip(
    "horovod",
    reason="horovod is not installed (it builds from source: HOROVOD_WITH_PYTORCH=1 "
    "HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 pip install horovod; 0.28.1 needs "
    "CMAKE_CXX_STANDARD 17 patched in for torch >= 2.1)",
)

TRAIN = textwrap.dedent(
    """
    import os, sys, torch
    import horovod.torch as hvd
    hvd.init()
    rank, world = hvd.rank(), hvd.size()
    if world != 2:
        sys.exit(f"hvd.size() is {world}, not 2")
    files = sorted(os.listdir(sys.argv[1]))[rank::world]
    total = torch.tensor([0], dtype=torch.int64)
    for name in files:
        with open(os.path.join(sys.argv[1], name), "rb") as f:
            total += sum(f.read())
    total = hvd.allreduce(total, op=hvd.Sum, name="bytes")
    ranks = hvd.allgather_object(rank)
    if rank == 0:
        with open(sys.argv[2], "w") as out:
            out.write(f"{world} {total.item()} {sorted(ranks)} {os.environ['CLOUDFS_JOB']}")
    hvd.shutdown()
    """
)


@pytest.mark.fuse
def test_a_two_worker_horovod_job_reads_a_mount(
    sched: Sched, data: tuple[Path, Path], tmp_path: Path
) -> None:
    job, result, _ = run_training_job(
        sched, data, tmp_path, TRAIN, name="hvd", framework="horovod", workers=2
    )
    assert result == f"2 {sum(i * MiB for i in range(8))} [0, 1] {job['id']}"
    assert job["warmup"]["cached_bytes"] >= 0.8 * 8 * MiB


def test_cancelling_a_horovod_job_stops_its_ranks(sched: Sched, tmp_path: Path) -> None:
    """``horovodrun`` starts each rank under a middleman in a session of its own:
    cancelling stops them too (the fixture asserts that no marked process is left)."""
    script = tmp_path / "wait.py"
    script.write_text(
        "import sys, time, horovod.torch as hvd\n"
        "hvd.init()\n"
        "open(f'{sys.argv[1]}.{hvd.rank()}', 'w').close()\n"
        "time.sleep(600)\n"
    )
    ready = tmp_path / "ready"
    job_id = sched.submit(
        name="hvd-wait", framework="horovod", workers=2,
        command=[sys.executable, str(script), str(ready)],
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not all(Path(f"{ready}.{rank}").exists() for rank in range(2)):
        assert time.monotonic() < deadline, sched.job(job_id)
        time.sleep(0.1)
    assert len(marked_pids(sched.marker)) >= 3  # the launcher and both ranks
    assert sched.ask({"op": "cancel", "id": job_id})["job"]["state"] == "cancelled"
    assert not marked_pids(sched.marker)
