"""The fault schedule, scaled to the soak's duration, and what each fault excuses.

Faults run one at a time, in the order of ``FAULTS``, between a warm-up (the first 10%
of the run) and a quiet tail (the last 10%), each followed by a gap in which the
workload must recover. The S3 outage lasts ``min(120 s, duration / 6)``, the tree
service's outage ``min(300 s, duration / 6)`` (or ``--tree-outage``); every other
fault ``min(60 s, duration / 20)``.

A failed operation is *allowed* when it overlaps a fault's window (plus ``GRACE``
seconds after it ends, for retries already under way) and its kind is one that fault
excuses: reads during S3 errors, stalls and the outage (a block in no cache must come
from S3, and the mount gives up after its retries with EIO). While the tree service is
down the mounts run detached: a read of a file the mount read before the outage must
succeed (issue 27: 0 failures), one it never read may fail; the write-back mount's
checkpoint writes and renames must succeed too (journaled while detached and replayed
when the service is back: ``cloudfs/meta/client/detached_writes.py``). Writes and renames
of the write-back mount are never excused by S3 faults (the soak found renaming
``latest.tmp`` over ``latest.bin`` failing with EIO in an outage: fixed in
``ops_rename``). Nothing is excused for the loss of one etcd member (the other two keep a
quorum), of one cache worker (mounts fall back to S3) or for a full cache disk (a cache
that cannot store still serves). A checksum mismatch is never allowed.

Recovery time: from a fault's end (its repair done) to the end of the first operation of
each (kind, mount) that started after it and succeeded.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .topology import Topology
from .workload import Op

GRACE = 15.0
WARMUP_SHARE = 0.1
TAIL_SHARE = 0.1


@dataclass(frozen=True)
class FaultSpec:
    name: str
    what: str
    excuses: frozenset[str]  # op kinds whose failures it allows
    unknown_reads: bool = False  # reads of a file its mount never read before it began too


S3_EXCUSES = frozenset({"read"})
TREE_EXCUSES: frozenset[str] = frozenset()  # writes are journaled, known reads served
FAULTS = [
    FaultSpec("s3_errors", "30% of S3 requests answered 503 SlowDown", S3_EXCUSES),
    FaultSpec("s3_stalls", "every S3 request held 2 s at the proxy", S3_EXCUSES),
    FaultSpec("s3_outage", "S3 refuses every connection", S3_EXCUSES),
    FaultSpec(
        "tree_outage",
        "the tree service down (its only server SIGKILLed), restarted at the end",
        TREE_EXCUSES,
        unknown_reads=True,
    ),
    FaultSpec("etcd_member_kill", "the etcd leader SIGKILLed, restarted", frozenset()),
    FaultSpec("cache_worker_kill", "one of 2 cache workers SIGKILLed, restarted", frozenset()),
    FaultSpec("cache_disk_full", "the reader mount's cache filesystem filled", frozenset()),
]


@dataclass
class Window:
    name: str
    what: str
    planned_start: float
    planned_length: float
    excuses: list[str]
    unknown_reads: bool = False
    start: float | None = None  # when the fault was applied (seconds since the start)
    end: float | None = None  # when its repair was done
    repair_s: float | None = None  # how long the repair itself took (restart, free)
    error: str | None = None  # the fault could not be applied or repaired
    detail: dict[str, Any] = field(default_factory=dict)


def plan(
    duration: float, tree_outage: float | None = None
) -> tuple[list[Window], dict[str, Any]]:
    """The windows for a soak of ``duration`` seconds, and how they were scaled;
    ``tree_outage``: the tree service's outage in seconds (default min(300, duration/6))."""
    outage = min(120.0, duration / 6)
    tree = tree_outage if tree_outage is not None else min(300.0, duration / 6)
    other = min(60.0, duration / 20)
    lengths = {"s3_outage": outage, "tree_outage": tree}
    busy = sum(lengths.get(spec.name, other) for spec in FAULTS)
    active = duration * (1 - WARMUP_SHARE - TAIL_SHARE)
    gap = max(0.0, (active - busy) / len(FAULTS))
    windows = []
    t = duration * WARMUP_SHARE
    for spec in FAULTS:
        length = lengths.get(spec.name, other)
        excuses = sorted(spec.excuses)
        windows.append(Window(spec.name, spec.what, t, length, excuses, spec.unknown_reads))
        t += length + gap
    scaling = {
        "outage_s": outage,
        "tree_outage_s": tree,
        "other_fault_s": other,
        "gap_s": gap,
        "warmup_s": duration * WARMUP_SHARE,
        "note": "the S3 outage lasts min(120 s, duration/6)"
        + (f": {outage:.0f} s in this shorter run" if outage < 120 else "")
        + f"; the tree service's outage {tree:.0f} s",
    }
    if busy > duration * (1 - WARMUP_SHARE - TAIL_SHARE):
        raise ValueError(f"the faults ({busy:.0f} s) do not fit a {duration:.0f} s soak")
    return windows, scaling


def fill(directory: Path) -> int:
    """Write zeros into ``directory``/filler until its filesystem is full; bytes written."""
    written = 0
    block = bytes(1 << 20)
    with open(directory / "soak-filler", "wb", buffering=0) as f:
        try:
            while True:
                written += f.write(block) or 0
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    return written


class FaultRunner:
    """Applies and repairs each window's fault at its time, in a thread of its own."""

    def __init__(self, topo: Topology, windows: list[Window], now: Callable[[], float]) -> None:
        self._topo = topo
        self._windows = windows
        self._now = now
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="faults", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 120.0) -> None:
        """Stop early (repairing the fault under way); wait for the thread."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        for w in self._windows:
            if self._stop.wait(max(0.0, w.planned_start - self._now())):
                return
            apply, repair = self._actions(w)
            w.start = self._now()
            try:
                apply()
            except Exception as e:  # reported, the soak goes on
                w.error = f"apply: {type(e).__name__}: {e}"
            self._stop.wait(max(0.0, w.start + w.planned_length - self._now()))
            began = self._now()
            try:
                repair()
            except Exception as e:
                w.error = f"repair: {type(e).__name__}: {e}"
            w.end = self._now()
            w.repair_s = w.end - began

    def _actions(self, w: Window) -> tuple[Callable[[], None], Callable[[], None]]:
        topo, proxy = self._topo, self._topo.proxy
        if w.name == "s3_errors":

            def errors_on() -> None:
                proxy.fault = "error"
                proxy.fail_ratio = 0.3

            return errors_on, lambda: setattr(proxy, "fail_ratio", 0.0)
        if w.name == "s3_stalls":
            return lambda: setattr(proxy, "delay", 2.0), lambda: setattr(proxy, "delay", 0.0)
        if w.name == "s3_outage":

            def outage_on() -> None:
                proxy.mode = "refuse"
                proxy.cut()

            return outage_on, lambda: setattr(proxy, "mode", "forward")
        if w.name == "tree_outage":
            return topo.tree.kill, topo.tree.restart
        if w.name == "etcd_member_kill":
            holder: list[int] = []

            def etcd_off() -> None:
                holder.append(topo.etcd.leader_index())
                w.detail["member"] = topo.etcd.members[holder[0]].name
                topo.etcd.members[holder[0]].kill()

            def etcd_on() -> None:
                if holder:
                    topo.etcd.members[holder[0]].start()
                topo.etcd.wait_healthy(60)

            return etcd_off, etcd_on
        if w.name == "cache_worker_kill":
            w.detail["worker"] = topo.workers[0].address
            return topo.workers[0].kill, topo.workers[0].restart
        if w.name == "cache_disk_full":

            def disk_full() -> None:
                w.detail["filled_bytes"] = fill(topo.reader_cache_fs)

            def disk_free() -> None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(topo.reader_cache_fs / "soak-filler")

            return disk_full, disk_free
        raise ValueError(f"unknown fault {w.name}")


def first_reads(ops: list[Op]) -> dict[tuple[str, str], float]:
    """When each (mount, path) was first read successfully (the end of that read)."""
    first: dict[tuple[str, str], float] = {}
    for op in ops:
        if op.ok and op.kind == "read":
            key = (op.mount, op.path)
            first[key] = min(op.end, first.get(key, op.end))
    return first


def excused_by(
    op: Op, windows: list[Window], known: dict[tuple[str, str], float] | None = None
) -> str | None:
    """The fault whose window excuses ``op``'s failure, or None; ``known``: ``first_reads``
    (without it, no file counts as known before a window)."""
    if op.checksum_mismatch:
        return None
    read_before = (known or {}).get((op.mount, op.path))
    for grace in (0.0, GRACE):  # a window the op overlaps first, then one it followed
        for w in windows:
            if w.start is None:
                continue
            unknown = op.kind == "read" and (read_before is None or read_before > w.start)
            if op.kind not in w.excuses and not (w.unknown_reads and unknown):
                continue
            end = (w.end if w.end is not None else op.end) + grace
            if op.start <= end and op.end >= w.start:
                return w.name
    return None


def recovery(windows: list[Window], ops: list[Op]) -> dict[str, dict[str, float | None]]:
    """For each fault: seconds from its end to the first success of each (kind, mount)."""
    streams = sorted({(op.kind, op.mount) for op in ops})
    result: dict[str, dict[str, float | None]] = {}
    for w in windows:
        if w.end is None:
            continue
        per: dict[str, float | None] = {}
        for kind, mount in streams:
            ends = [
                op.end
                for op in ops
                if op.ok and op.kind == kind and op.mount == mount and op.start >= w.end
            ]
            per[f"{kind}@{mount}"] = round(min(ends) - w.end, 2) if ends else None
        result[w.name] = per
    return result


def as_dicts(windows: list[Window]) -> list[dict[str, Any]]:
    return [asdict(w) for w in windows]
