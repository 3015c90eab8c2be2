"""A scheduler killed between starting a job's workers and recording them as
running: the next one stops whatever of that attempt started and starts it
again, so no worker is orphaned and none runs twice. In-process (the loop's
``recover`` and ``tick``), with real worker processes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from cloudfs.jobs import runner
from cloudfs.jobs.record import STARTING
from cloudfs.jobs.scheduler import Scheduler
from tests.jobs.conftest import marked_pids

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


def test_a_scheduler_killed_mid_start_restarts_the_attempt(tmp_path: Path) -> None:
    marker = f"recovery-{time.monotonic_ns()}"
    spec = {"name": "mid", "workers": 2, "command": "sleep 600",
            "env": {"CLOUDFS_TEST_MARK": marker}}  # fmt: skip
    first = Scheduler(tmp_path, tmp_path / "none.yaml", stop_grace=1)
    try:
        record = first.submit(yaml.safe_dump(spec))
        # What a scheduler killed inside _launch leaves: the state says starting,
        # the workers of attempt 1 run, nobody recorded them as running.
        record.state, record.attempt = STARTING, 1
        first.store.put(record)
        runner.launch(record.spec, record.id, 1, first.jobs_dir)
        deadline = time.monotonic() + 10
        while len(runner.roots(runner.attempt_dir(first.jobs_dir, record.id, 1))) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        orphans = set(marked_pids(marker))
    finally:
        first.store.close()
    second = Scheduler(tmp_path, tmp_path / "none.yaml", stop_grace=1)
    try:
        second.recover()
        assert not orphans & set(marked_pids(marker))  # the half-started attempt is gone
        deadline = time.monotonic() + 30
        while second.get(record.id).state != "running":
            assert time.monotonic() < deadline, second.get(record.id)
            second.tick()
            time.sleep(0.1)
        assert second.get(record.id).attempt == 2
        events = [e["message"] for e in second.store.events(record.id)]
        assert "the scheduler stopped while starting it: started again" in events
        assert second.cancel(record.id).state == "cancelled"
        assert not marked_pids(marker)
    finally:
        second.store.close()
