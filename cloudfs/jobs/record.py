"""One job as the scheduler keeps it: its spec, its state and its history."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from cloudfs.jobs.spec import JobSpec

QUEUED = "queued"  # waiting for quota (``reason`` says which)
WARMING = "warming"  # admitted: its volumes are being mounted and warmed
STARTING = "starting"  # its workers are being started
RUNNING = "running"
RETRYING = "retrying"  # an attempt failed; queued again at ``next_try_at``
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
FINAL = frozenset({SUCCEEDED, FAILED, CANCELLED})
ADMITTED = frozenset({WARMING, STARTING, RUNNING})  # hold their resources


@dataclass
class JobRecord:
    id: str
    seq: int
    spec: JobSpec
    state: str = QUEUED
    reason: str = ""
    submitted_at: float = 0.0
    started_at: float = 0.0  # the first attempt started (wall clock)
    attempt_started_at: float = 0.0
    finished_at: float = 0.0
    queued_seconds: float = 0.0  # spent queued, over every attempt
    queued_since: float = 0.0
    attempt: int = 0  # attempts started so far
    next_try_at: float = 0.0
    cancel_requested: bool = False
    warmup: dict[str, float] = field(default_factory=dict)  # bytes, cached_bytes, target
    exits: list[list[int | None]] = field(default_factory=list)  # per attempt, per worker
    stall_seconds: float = 0.0  # time its ranks waited on data (the mounts' telemetry)
    # The GPU indices of each worker of attempt ``devices_attempt``; emptied when it ends.
    devices: list[list[int]] = field(default_factory=list)
    devices_attempt: int = 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["spec"] = self.spec.to_json()
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> JobRecord:
        return JobRecord(**{**data, "spec": JobSpec.from_json(data["spec"])})

    def release_devices(self) -> None:
        """The attempt ended (or never started): its GPUs are free again."""
        self.devices, self.devices_attempt = [], 0
