"""The scheduler's loop: admit queued jobs by the policy, make their data ready,
start, watch, retry, cancel; and recover all of it after a restart.

State lives in the ``JobStore``; this object keeps only what a restart may
lose: the handles of the shims it started (to reap them) and the warm-up
threads. Warm-ups run in threads because they wait on mounts' sockets for
minutes; everything else happens on the loop, under one lock that the API
calls (``server``) share.

A scheduler stopped (or killed) leaves the workers running: each writes its
own pid and exit files (``cloudfs.jobs.shim``), through which the next one
re-adopts them. Only a job caught between ``starting`` and ``running`` is
stopped and started again, as its processes may not all have started.

GPU indices are handed out when an attempt starts (``devices.assign``, avoiding
those every other started job's record holds) and given back when it ends, in
whatever state; a re-adopted running job keeps its own.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from cloudfs.errors import FsError, InvalidArgument, NotFound
from cloudfs.jobs import config as config_mod
from cloudfs.jobs import devices, machine, policy, readiness, report, runner, spec, telemetry
from cloudfs.jobs.record import (
    ADMITTED,
    CANCELLED,
    FAILED,
    FINAL,
    QUEUED,
    RETRYING,
    RUNNING,
    STARTING,
    SUCCEEDED,
    WARMING,
    JobRecord,
)
from cloudfs.jobs.store import JobStore

log = logging.getLogger(__name__)
STALL_EVERY = 5.0  # seconds between samples of a running job's stall telemetry


class Scheduler:
    def __init__(self, state_dir: Path, config_path: Path, *, stop_grace: float = 5.0) -> None:
        self.state_dir = state_dir
        self.jobs_dir = state_dir / "jobs"
        self.store = JobStore(state_dir / "state")
        self._config_path = config_path
        self._config_mtime: float | None = None
        self._found = machine.detect()  # what the config's machine leaves out
        self.config = self._load_config()
        self._grace = stop_grace
        self._lock = threading.RLock()
        self._children: dict[str, list[runner.Popen]] = {}
        self._warmups: dict[str, threading.Thread] = {}
        self._ready: dict[str, BaseException | None] = {}  # job id -> what its warm-up ended in
        self._cancel: dict[str, threading.Event] = {}
        self._stall_at: dict[str, float] = {}

    # The API (``server``) -------------------------------------------------------------

    def submit(self, text: str, user: str | None = None) -> JobRecord:
        job = spec.load(text, default_user=user)
        if not job.command:
            raise InvalidArgument("command: the embedded scheduler runs a command (image alone "
                                  "is for the Kubernetes scheduler)")  # fmt: skip
        if job.group not in self.config.groups:
            known = ", ".join(sorted(self.config.groups))
            raise InvalidArgument(f"group: unknown group {job.group!r} (known: {known})")
        with self._lock:
            seq = self.store.next_seq()
            now = time.time()
            record = JobRecord(f"{job.name}-{seq}", seq, job, submitted_at=now, queued_since=now)
            self.store.put(record, f"submitted by {job.user} to group {job.group}")
        return record

    def get(self, job_id: str) -> JobRecord:
        record = self.store.get(job_id)
        if record is None:
            raise NotFound(f"no job {job_id}")
        return record

    def jobs(self) -> list[JobRecord]:
        return self.store.all()

    def cancel(self, job_id: str) -> JobRecord:
        with self._lock:
            record = self.get(job_id)
            if record.state in FINAL:
                raise FsError(f"job {job_id} already {record.state}", errno=errno.EALREADY)
            record.cancel_requested = True
            self._cancel.setdefault(job_id, threading.Event()).set()
            if record.state in (QUEUED, RETRYING):
                self._finish(record, CANCELLED, "cancelled while queued")
            else:
                self.store.put(record, "cancel requested")
                self._tick_one(record)
            return self.get(job_id)

    def logs(self, job_id: str) -> list[str]:
        """The log files of the job's latest attempt."""
        record = self.get(job_id)
        directory = runner.attempt_dir(self.jobs_dir, job_id, max(record.attempt, 1))
        return [str(p) for p in sorted(directory.glob("worker-*.log"))]

    # The loop -------------------------------------------------------------------------

    def recover(self) -> None:
        """After a start: stop half-started attempts; running ones are re-adopted as is."""
        with self._lock:
            for record in self.store.all():
                if record.state == STARTING:
                    runner.stop(self._dir(record), runner.processes(record.spec), None, self._grace)
                    record.state = WARMING
                    record.release_devices()
                    self.store.put(record, "the scheduler stopped while starting it: started again")
                elif record.state == RUNNING:
                    live = sum(w.running for w in self._poll(record))
                    self.store.put(record, f"re-adopted after a scheduler restart ({live} live)")

    def tick(self) -> None:
        with self._lock:
            self._reload_config()
            for record in self.store.all():
                if record.state not in FINAL:
                    self._tick_one(record)
            self._admit()

    def _tick_one(self, record: JobRecord) -> None:
        if record.state == RUNNING:
            self._watch(record)
        elif record.state == WARMING:
            if record.cancel_requested:
                self._finish(record, CANCELLED, "cancelled while its data was being warmed")
            else:
                self._check_warmup(record)
        elif record.state == RETRYING and time.time() >= record.next_try_at:
            record.state, record.queued_since = QUEUED, time.time()
            self.store.put(record, f"queued again for attempt {record.attempt + 1}")

    def _admit(self) -> None:
        records = self.store.all()
        queued = [r for r in records if r.state == QUEUED]
        admitted = [r for r in records if r.state in ADMITTED]
        plan = policy.plan(map(_demand, queued), map(_demand, admitted), self.config)
        by_id = {r.id: r for r in queued}
        now = time.time()
        for job_id in plan.start:
            record = by_id[job_id]
            record.state, record.reason = WARMING, ""
            record.queued_seconds += max(0.0, now - record.queued_since)
            self.store.put(record, "admitted: making its data ready")
        for job_id, reason in plan.waiting.items():
            record = by_id[job_id]
            if record.reason != reason:
                record.reason = reason
                self.store.put(record, f"waiting: {reason}")

    # Data readiness -------------------------------------------------------------------

    def _check_warmup(self, record: JobRecord) -> None:
        if record.id not in self._warmups:
            self._start_warmup(record)
            return
        if record.id not in self._ready:
            return
        outcome = self._ready[record.id]
        if outcome is None and not self._launch(record):
            return  # ready, its GPUs not free yet: tried again next tick
        self._ready.pop(record.id, None)
        self._warmups.pop(record.id, None)
        if outcome is None:
            return  # started (or its start failed, already recorded)
        if isinstance(outcome, readiness.Cancelled):
            self._finish(record, CANCELLED, "cancelled while its data was being warmed")
        else:
            self._finish(record, FAILED, f"data not ready: {outcome}")

    def _start_warmup(self, record: JobRecord) -> None:
        job_id, job = record.id, record.spec
        cancel = self._cancel.setdefault(job_id, threading.Event())
        last = [0.0]

        def progress(cached: int, total: int) -> None:
            if time.monotonic() - last[0] < 0.5 and cached < total:
                return
            last[0] = time.monotonic()
            with self._lock:
                current = self.store.get(job_id)
                if current is not None and current.state == WARMING:
                    target = job.min_cached * total
                    current.warmup = {"cached_bytes": cached, "bytes": total, "target": target}
                    self.store.put(current)

        def work() -> None:
            outcome: BaseException | None = None
            try:
                readiness.prepare(job, self.state_dir / "cache", progress, cancel.is_set)
            except (FsError, readiness.Cancelled, OSError) as e:
                outcome = e
            except Exception as e:  # a bug must not leave the job warming forever
                log.exception("warm-up of %s failed", job_id)
                outcome = e
            with self._lock:
                if job_id in self._warmups:  # not given up on (cancelled) meanwhile
                    self._ready[job_id] = outcome

        thread = threading.Thread(target=work, name=f"warmup-{job_id}", daemon=True)
        self._warmups[job_id] = thread
        thread.start()

    # Workers --------------------------------------------------------------------------

    def _launch(self, record: JobRecord) -> bool:
        """Start the next attempt; False if its GPUs are not free (the machine's
        capacity shrank under admitted jobs): it stays warming, ready."""
        job = record.spec
        taken = [i for r in self.store.all() if r.id != record.id for w in r.devices for i in w]
        try:
            total = self.config.machine.gpus
            assigned = devices.assign(job.workers, job.resources.gpus, taken, total)
        except LookupError as e:
            reason = f"waiting for its GPUs: {e}"
            if record.reason != reason:
                record.reason = reason
                self.store.put(record, reason)
            return False
        record.state, record.reason = STARTING, ""
        record.attempt += 1
        record.devices, record.devices_attempt = assigned, record.attempt
        shown = " | ".join(devices.visible(w) for w in assigned)
        self.store.put(record, f"starting attempt {record.attempt}"
                       + (f" on GPUs {shown}" if assigned else ""))  # fmt: skip
        try:
            children = runner.launch(job, record.id, record.attempt, self.jobs_dir, assigned)
        except OSError as e:
            self._stop(record)  # those that did start
            self._failed_attempt(record, [], f"cannot start its workers: {e.strerror}")
            return True
        self._children[record.id] = children
        now = time.time()
        record.state, record.attempt_started_at = RUNNING, now
        record.started_at = record.started_at or now
        self.store.put(record, f"attempt {record.attempt} running ({len(children)} processes)")
        return True

    def _dir(self, record: JobRecord) -> Path:
        return runner.attempt_dir(self.jobs_dir, record.id, record.attempt)

    def _poll(self, record: JobRecord) -> list[runner.WorkerState]:
        count = runner.processes(record.spec)
        return runner.poll(self._dir(record), count, self._children.get(record.id))

    def _watch(self, record: JobRecord) -> None:
        if record.cancel_requested:
            self._stop(record)
            self._reap(record)
            self._finish(record, CANCELLED, "cancelled: every worker stopped")
            return
        self._sample_stall(record)
        states = self._poll(record)
        failed = [w for w in states if not w.running and w.exit != 0]
        limit = record.spec.max_runtime
        if not failed and limit and time.time() - record.attempt_started_at > limit:
            self._stop(record)
            self._reap(record)
            reason = f"ran past max_runtime ({limit:g} s): hung? stopped"
            self._failed_attempt(record, [w.exit for w in self._poll(record)], reason)
            return
        if failed:
            if any(w.running for w in states):
                self._stop(record)  # one rank down: the rest would hang
            self._reap(record)
            first = failed[0]
            reason = f"worker {first.rank} {runner.describe(first.exit)}"
            self._failed_attempt(record, [w.exit for w in self._poll(record)], reason)
        elif not any(w.running for w in states):
            self._reap(record)
            record.exits.append([0] * len(states))
            self._finish(record, SUCCEEDED, f"every worker exited 0 (attempt {record.attempt})")

    def _stop(self, record: JobRecord) -> None:
        count = runner.processes(record.spec)
        runner.stop(self._dir(record), count, self._children.get(record.id), self._grace)

    def _failed_attempt(self, record: JobRecord, exits: list[int | None], reason: str) -> None:
        record.exits.append(exits)
        record.release_devices()
        if record.attempt <= record.spec.retries:
            delay = record.spec.retry_backoff * 2 ** (record.attempt - 1)
            record.state, record.next_try_at = RETRYING, time.time() + delay
            record.reason = f"attempt {record.attempt}: {reason}; retry in {delay:g} s"
            self.store.put(record, record.reason)
        else:
            tries = f" after {record.attempt} attempts" if record.attempt > 1 else ""
            self._finish(record, FAILED, f"{reason}{tries}")

    def _reap(self, record: JobRecord) -> None:
        for child in self._children.pop(record.id, []):
            child.poll()

    def _finish(self, record: JobRecord, state: str, reason: str) -> None:
        if record.state == QUEUED:
            record.queued_seconds += max(0.0, time.time() - record.queued_since)
        record.state, record.reason, record.finished_at = state, reason, time.time()
        record.release_devices()
        self.store.put(record, f"{state}: {reason}")
        self._cancel.pop(record.id, None)
        self._stall_at.pop(record.id, None)
        self._warmups.pop(record.id, None)
        self._ready.pop(record.id, None)

    def _sample_stall(self, record: JobRecord) -> None:
        if not record.spec.volumes:
            return
        now = time.monotonic()
        if now - self._stall_at.get(record.id, 0.0) < STALL_EVERY:
            return
        self._stall_at[record.id] = now
        mounts = [os.path.realpath(v.mount) for v in record.spec.volumes]
        seen = telemetry.stall_seconds(mounts, record.id, timeout=1.0)
        if seen is not None and seen > record.stall_seconds:
            record.stall_seconds = seen
            self.store.put(record)

    # Config ---------------------------------------------------------------------------

    def _load_config(self) -> config_mod.SchedulerConfig:
        try:
            self._config_mtime = self._config_path.stat().st_mtime
        except OSError:
            self._config_mtime = None
        loaded = config_mod.load_file(self._config_path)
        return replace(loaded, machine=machine.fill(loaded.machine, self._found))

    def _reload_config(self) -> None:
        try:
            mtime: float | None = self._config_path.stat().st_mtime
        except OSError:
            mtime = None
        if mtime != self._config_mtime:
            try:
                self.config = self._load_config()
                log.info("reloaded %s", self._config_path)
            except FsError as e:
                log.error("kept the previous config: %s", e)

    def report(self) -> dict[str, Any]:
        return report.build(self.store.all(), self.config, self.jobs_dir)

    def describe_config(self) -> dict[str, Any]:
        return {
            "groups": {n: {"quota": _quota(g.quota), "borrow": g.borrow}
                       for n, g in self.config.groups.items()},
            "users": {n: _quota(q) for n, q in self.config.users.items()},
            "machine": self.config.machine.as_dict(),
        }  # fmt: skip


def _demand(record: JobRecord) -> policy.Demand:
    job, want = record.spec, report.demand(record)
    return policy.Demand(record.id, job.group, job.user, job.priority, record.seq,
                         want["gpus"], want["cpus"], want["memory"])  # fmt: skip


def _quota(q: config_mod.Quota) -> dict[str, float | None]:
    return {r: q.limit(r) for r in config_mod.RESOURCES}
