"""The scheduler's state in LMDB: every job record and its events.

Two named databases: ``jobs`` (job id -> the record as JSON) and ``events``
(job id, NUL, an 8-byte sequence shared by all jobs -> ``{"at", "message"}``). Every change is one
write transaction, so a scheduler killed at any point restarts from the last
committed state (``scheduler.Scheduler.recover`` then reconciles it with the
processes that still run).
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb

from cloudfs.jobs.record import JobRecord

MAP_SIZE = 1 << 30


class JobStore:
    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._env = lmdb.open(str(path), map_size=MAP_SIZE, max_dbs=4, subdir=True)
        self._jobs = self._env.open_db(b"jobs")
        self._events = self._env.open_db(b"events")
        self._meta = self._env.open_db(b"meta")

    def close(self) -> None:
        self._env.close()

    def next_seq(self) -> int:
        with self._env.begin(write=True, db=self._meta) as txn:
            raw = txn.get(b"seq")
            seq = (int(raw) if raw else 0) + 1
            txn.put(b"seq", str(seq).encode())
            return seq

    def put(self, record: JobRecord, event: str | None = None) -> None:
        """Save ``record`` and, in the same transaction, an event about it."""
        with self._env.begin(write=True) as txn:
            txn.put(record.id.encode(), json.dumps(record.to_json()).encode(), db=self._jobs)
            if event:
                self._add_event(txn, record.id, event)

    def get(self, job_id: str) -> JobRecord | None:
        with self._env.begin(db=self._jobs) as txn:
            raw = txn.get(job_id.encode())
        return JobRecord.from_json(json.loads(raw)) if raw else None

    def all(self) -> list[JobRecord]:
        with self._env.begin(db=self._jobs) as txn:
            records = [JobRecord.from_json(json.loads(v)) for _, v in txn.cursor()]
        return sorted(records, key=lambda r: r.seq)

    def events(self, job_id: str) -> Iterator[dict[str, Any]]:
        prefix = job_id.encode() + b"\0"
        with self._env.begin(db=self._events) as txn:
            cursor = txn.cursor()
            if cursor.set_range(prefix):
                for key, value in cursor:
                    if not key.startswith(prefix):
                        break
                    yield json.loads(value)

    def _add_event(self, txn: Any, job_id: str, message: str) -> None:
        raw = txn.get(b"event_seq", db=self._meta)
        n = (int(raw) if raw else 0) + 1  # one counter for all jobs: keys sort by time
        txn.put(b"event_seq", str(n).encode(), db=self._meta)
        entry = json.dumps({"at": time.time(), "message": message}).encode()
        txn.put(job_id.encode() + b"\0" + struct.pack(">Q", n), entry, db=self._events)
