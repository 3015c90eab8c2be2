"""A real ``cloudfs scheduler serve`` per test, in a temporary state directory.

Every job a test submits carries a unique marker in its environment; after
the test the fixture cancels whatever still runs and asserts that no process
with the marker is left (no orphan workers).

A config without ``machine`` gets a large one (``BIG_MACHINE``): this machine
has no GPUs and few cores, and the tests about quotas are not about it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from cloudfs.errors import FsError, StartupError
from cloudfs.jobs.client import request
from testkit.mounts import force_unmount

BIG_MACHINE = {"gpus": 16, "cpus": 256, "memory": "4T"}
MiB = 1 << 20


def marked_pids(marker: str) -> list[int]:
    needle = f"CLOUDFS_TEST_MARK={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@dataclass
class Sched:
    state: Path
    config: Path
    marker: str = field(default_factory=lambda: uuid.uuid4().hex)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [sys.executable, "-m", "cloudfs.cli.main", "scheduler", "serve",
               "--state-dir", str(self.state), "--config", str(self.config)]  # fmt: skip
        log = open(self.state / "serve.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                self.ask({"op": "ping"})
                return
            except (StartupError, FsError, OSError):
                time.sleep(0.1)
        raise AssertionError("the scheduler did not start: " + self.log())

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)
            self.proc = None

    def log(self) -> str:
        path = self.state / "serve.log"
        return path.read_text() if path.exists() else ""

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        return request(self.state, message, timeout=10)

    def submit(self, **spec: Any) -> str:
        spec.setdefault("env", {})["CLOUDFS_TEST_MARK"] = self.marker
        spec.setdefault("retry_backoff", 0.2)
        job: dict[str, Any] = self.ask({"op": "submit", "spec": yaml.safe_dump(spec)})["job"]
        return str(job["id"])

    def job(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] = self.ask({"op": "status", "id": job_id})["job"]
        return job

    def events(self, job_id: str) -> list[str]:
        return [e["message"] for e in self.ask({"op": "status", "id": job_id})["events"]]

    def wait_reason(self, job_id: str, timeout: float = 30) -> str:
        """Why the job waits, once the scheduler has said."""
        deadline = time.monotonic() + timeout
        while not (reason := str(self.job(job_id)["reason"])):
            assert time.monotonic() < deadline, f"{job_id} has no reason"
            time.sleep(0.1)
        return reason

    def wait(self, job_id: str, *states: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["state"] in states:
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"{job_id} is {job['state']} ({job['reason']}), not {states}")
            time.sleep(0.1)


@pytest.fixture
def sched(tmp_path: Path) -> Iterator[Sched]:
    s = _make(tmp_path, {"groups": {"default": {}}})
    yield s
    _teardown(s)


@pytest.fixture
def sched_factory(tmp_path: Path) -> Iterator[Any]:
    made: list[Sched] = []

    def make(config: dict[str, Any]) -> Sched:
        s = _make(tmp_path / str(len(made)), config)
        made.append(s)
        return s

    yield make
    for s in made:
        _teardown(s)


def _make(path: Path, config: dict[str, Any]) -> Sched:
    path.mkdir(parents=True, exist_ok=True)
    config = {"machine": BIG_MACHINE, **config}
    (path / "scheduler.yaml").write_text(yaml.safe_dump(config))
    s = Sched(path / "state", path / "scheduler.yaml")
    s.state.mkdir()
    s.start()
    return s


def _teardown(s: Sched) -> None:
    try:
        if s.proc is None:  # a test that killed it and failed before starting it again
            s.start()
        if s.proc is not None:
            for job in s.ask({"op": "list"})["jobs"]:
                if job["state"] not in ("succeeded", "failed", "cancelled"):
                    s.ask({"op": "cancel", "id": job["id"]})
    finally:
        s.stop()
        left = marked_pids(s.marker)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, f"orphan worker processes: {left}"


@pytest.fixture
def data(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A UFS directory with ``train/`` (8 files of 1 MiB) and where to mount it; the
    scheduler leaves its mounts mounted, so this unmounts."""
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("FUSE tests need /dev/fuse and root")
    ufs, mnt = tmp_path / "ufs", tmp_path / "mnt"
    (ufs / "train").mkdir(parents=True)
    for i in range(8):
        (ufs / "train" / f"{i:02d}.bin").write_bytes(bytes([i]) * MiB)
    yield ufs, mnt
    subprocess.run([sys.executable, "-m", "cloudfs.cli.main", "umount", str(mnt)],
                   capture_output=True, timeout=60)  # fmt: skip
    force_unmount(mnt)


def volume(ufs: Path, mnt: Path, *options: str) -> dict[str, object]:
    return {"uri": f"file://{ufs}", "mount": str(mnt), "options": list(options)}


def run_training_job(
    sched: Sched, data: tuple[Path, Path], tmp_path: Path, script: str, **spec: Any
) -> tuple[dict[str, Any], str, str]:
    """Run ``script`` (its arguments: the mounted ``train/`` and a result file) as a job
    with ``spec`` over the ``data`` volume, warmed to 80%; the finished job, its result
    and its logs."""
    ufs, mnt = data
    path, out = tmp_path / "train.py", tmp_path / "result"
    path.write_text(script)
    job_id = sched.submit(
        command=[sys.executable, str(path), str(mnt / "train"), str(out)],
        volumes=[volume(ufs, mnt)], datasets=[str(mnt / "train")],
        readiness={"min_cached": 0.8}, **spec,
    )  # fmt: skip
    job = sched.wait(job_id, "succeeded", "failed", timeout=240)
    logs = "".join(Path(f).read_text() for f in sched.ask({"op": "logs", "id": job_id})["files"])
    assert job["state"] == "succeeded", f"{job['reason']}\n{logs}"
    return job, out.read_text(), logs
