"""ChangeLog: a write-back mount's namespace changes made while the tree was away, on disk.

One JSON object per line, appended and ``fdatasync``-ed before the change is
answered (detached changes are rare: one sync each is cheap beside losing
them). Records:

* ``{"k": "numbers", "first": F, "count": N}``: inode numbers the tree service
  reserved for this mount (``ReserveInodes``); a detached create takes one;
* ``{"k": "change", "seq": S, "op": ..., ...}``: a change to replay, in order
  (``op`` and its fields: ``detached_writes.py``); names are hex;
* ``{"k": "done", "seq": S}``: the change ``S`` reached the tree (or was
  reported as a conflict), so it is not replayed again.

A torn last line (the mount died while appending) is ignored: its change was
never answered, so no caller was told it happened. ``compact`` rewrites the
file (temp file, fsync, rename, fsync of the directory) with only the numbers
left and the changes not done, once a replay has emptied it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class LoggedChange:
    seq: int
    op: str
    fields: dict[str, Any] = field(default_factory=dict)


class ChangeLog:
    def __init__(self, path: str) -> None:
        """Open (or create) the log at ``path`` and read what it holds."""
        self._path = path
        self._lock = threading.Lock()
        self.numbers: deque[int] = deque()  # reserved and not yet taken
        self.pending: list[LoggedChange] = []  # journaled, not done, in order
        self._seq = 0
        self._load()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    def _load(self) -> None:
        try:
            with open(self._path, encoding="ascii") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return
        done: set[int] = set()
        taken: set[int] = set()
        changes: list[LoggedChange] = []
        for n, line in enumerate(lines):
            try:
                rec = json.loads(line)
            except ValueError:
                if n == len(lines) - 1:
                    break  # torn by a crash mid-append: never answered
                raise
            kind = rec.pop("k")
            if kind == "numbers":
                self.numbers.extend(range(rec["first"], rec["first"] + rec["count"]))
            elif kind == "done":
                done.add(rec["seq"])
            elif kind == "change":
                seq = rec.pop("seq")
                changes.append(LoggedChange(seq, rec.pop("op"), rec))
                if "inode" in rec and rec.get("made"):
                    taken.add(rec["inode"])
                self._seq = max(self._seq, seq)
        self.numbers = deque(n for n in self.numbers if n not in taken)
        self.pending = [c for c in changes if c.seq not in done]

    def _append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode("ascii")
        os.write(self._fd, line)
        os.fdatasync(self._fd)

    def add_numbers(self, first: int, count: int) -> None:
        with self._lock:
            self._append({"k": "numbers", "first": first, "count": count})
            self.numbers.extend(range(first, first + count))

    def take_number(self) -> int | None:
        """A reserved inode number for a detached create (logged with its change), or None."""
        with self._lock:
            return self.numbers.popleft() if self.numbers else None

    def add(self, op: str, **fields: Any) -> LoggedChange:
        """Journal a change (durably) before it is answered."""
        with self._lock:
            self._seq += 1
            change = LoggedChange(self._seq, op, fields)
            self._append({"k": "change", "seq": change.seq, "op": op, **fields})
            self.pending.append(change)
            return change

    def done(self, change: LoggedChange) -> None:
        with self._lock:
            self._append({"k": "done", "seq": change.seq})
            self.pending.remove(change)

    def compact(self) -> None:
        """Rewrite the log with only the numbers left and the changes not done."""
        with self._lock:
            records: list[dict[str, Any]] = [
                {"k": "numbers", "first": first, "count": count}
                for first, count in _runs(self.numbers)
            ]
            for c in self.pending:
                records.append({"k": "change", "seq": c.seq, "op": c.op, **c.fields})
            temp = self._path + ".tmp"
            with open(temp, "w", encoding="ascii") as f:
                for record in records:
                    f.write(json.dumps(record, separators=(",", ":")) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, self._path)
            directory = os.open(os.path.dirname(self._path) or ".", os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
            os.close(self._fd)
            self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)

    def close(self) -> None:
        with self._lock:
            os.close(self._fd)


def _runs(numbers: deque[int]) -> list[tuple[int, int]]:
    """``numbers`` as (first, count) runs of consecutive numbers, in order."""
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and runs[-1][0] + runs[-1][1] == n:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((n, 1))
    return runs
