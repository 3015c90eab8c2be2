"""The measured write passes (issue 5), and the bytes they write.

Each pass runs in a child process (``python3 -m bench.writeload``, a JSON spec on stdin, a
JSON result on stdout; started by ``workloads.run_pass``), so that a pass stuck in a FUSE
request is bounded: past its limit the parent tears the mount down and kills the child.

Spec kinds:

- ``large``: ``{"kind": "large", "path": P, "file_id": I, "size": S}`` — open P, write S
  bytes in 1 MiB ``os.write`` calls, close; MiB/s from open to the end of close, and the
  close alone.
- ``small``: ``{"kind": "small", "dir": D, "count": N, "size": S, "first_id": I,
  "budget_s": B}`` — N files ``D/fNNNN.bin`` of S bytes, each opened, written and closed,
  one after another from one thread; files/s and the open, write and close latencies. A
  system that takes longer than B seconds is stopped after the file in progress then
  (``files`` says how many were written), so that a slow system's rate is still measured
  but does not stretch the run.
- ``many``: ``{"kind": "many", "dir": D, "count": N, "size": S, "first_id": I,
  "threads": T, "fsync": F, "budget_s": B}`` — N new files ``D/fNNNN.bin`` of S bytes
  (S <= 1 MiB, one write each), created, written and closed by T threads taking the next
  index from a shared counter (with ``fsync``: an fsync before each close); files/s to the
  end of the last close, and the latencies. After B seconds no thread starts another file
  (``files``: those written, indexes 0 to files - 1).

All report ``end_wall``, the wall-clock time just after the last close, from which the
parent times how long the bytes then take to reach the object store.

The bytes are deterministic, so the parent can check what landed in S3 without keeping a
copy: chunk ``i`` of file ``I`` is a 1 MiB slice, at an offset that depends on ``i`` and
``I``, of one 2 MiB random buffer (seeded); every chunk of every file differs.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import random
import statistics
import sys
import threading
import time
from functools import cache
from typing import Any

CHUNK = 1 << 20
MiB = 1 << 20
SEED = 20261203


@cache
def _base() -> bytes:
    return random.Random(SEED).randbytes(2 * CHUNK)


def chunk(file_id: int, index: int, size: int = CHUNK) -> memoryview:
    """The ``index``-th chunk of file ``file_id`` (no copy; ``size`` <= 1 MiB)."""
    offset = (index * 4099 + file_id * 7919) % CHUNK  # 4099 is odd: distinct for every index
    return memoryview(_base())[offset : offset + size]


def chunks(file_id: int, size: int) -> list[memoryview]:
    return [
        chunk(file_id, i, min(CHUNK, size - pos)) for i, pos in enumerate(range(0, size, CHUNK))
    ]


def expected_digest(file_id: int, size: int) -> str:
    h = hashlib.sha256()
    for part in chunks(file_id, size):
        h.update(part)
    return h.hexdigest()


def small_name(index: int) -> str:
    return f"f{index:04d}.bin"


# --- the child side -------------------------------------------------------------------


def write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


def large_pass(path: str, file_id: int, size: int) -> dict[str, Any]:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    parts = chunks(file_id, size)
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for part in parts:
        write_all(fd, part)
    written = time.perf_counter()
    os.close(fd)
    done = time.perf_counter()
    end_wall = time.time()
    return {
        "bytes": size,
        "seconds": done - start,
        "write_seconds": written - start,
        "mib_s": size / MiB / (done - start),
        "close_ms": (done - written) * 1000,
        "end_wall": end_wall,
    }


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def small_pass(
    directory: str, count: int, size: int, first_id: int, budget_s: float | None = None
) -> dict[str, Any]:
    os.makedirs(directory, exist_ok=True)
    opens: list[float] = []
    writes: list[float] = []
    closes: list[float] = []
    start = time.perf_counter()
    for i in range(count):
        data = chunks(first_id + i, size)
        t0 = time.perf_counter()
        fd = os.open(os.path.join(directory, small_name(i)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        t1 = time.perf_counter()
        for part in data:
            write_all(fd, part)
        t2 = time.perf_counter()
        os.close(fd)
        t3 = time.perf_counter()
        opens.append((t1 - t0) * 1000)
        writes.append((t2 - t1) * 1000)
        closes.append((t3 - t2) * 1000)
        if budget_s is not None and t3 - start > budget_s:
            break
    secs = time.perf_counter() - start
    end_wall = time.time()
    closes.sort()
    return {
        "files": len(closes),
        "files_requested": count,
        "bytes": len(closes) * size,
        "seconds": secs,
        "files_s": len(closes) / secs,
        "open_p50_ms": statistics.median(opens),
        "write_p50_ms": statistics.median(writes),
        "close_mean_ms": statistics.fmean(closes),
        "close_p50_ms": statistics.median(closes),
        "close_p99_ms": percentile(closes, 0.99),
        "close_max_ms": closes[-1],
        "end_wall": end_wall,
    }


def many_pass(
    directory: str,
    count: int,
    size: int,
    first_id: int,
    threads: int,
    fsync: bool,
    budget_s: float | None = None,
) -> dict[str, Any]:
    os.makedirs(directory, exist_ok=True)
    data = [chunk(first_id + i, 0, size) for i in range(count)]
    order = iter(range(count))
    lock = threading.Lock()
    closes: list[float] = []
    opens: list[float] = []
    writes: list[float] = []

    def worker() -> None:
        mine: list[float] = []
        my_opens: list[float] = []
        my_writes: list[float] = []
        while True:
            with lock:
                late = budget_s is not None and time.perf_counter() - start > budget_s
                i = None if late else next(order, None)
            if i is None:
                break
            path = os.path.join(directory, small_name(i))
            t0 = time.perf_counter()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            t1 = time.perf_counter()
            write_all(fd, data[i])
            if fsync:
                os.fsync(fd)
            t2 = time.perf_counter()
            os.close(fd)
            mine.append((time.perf_counter() - t2) * 1000)
            my_opens.append((t1 - t0) * 1000)
            my_writes.append((t2 - t1) * 1000)
        with lock:
            closes.extend(mine)
            opens.extend(my_opens)
            writes.extend(my_writes)

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(worker) for _ in range(threads)]:
            future.result()
    secs = time.perf_counter() - start
    end_wall = time.time()
    closes.sort()
    done = len(closes)
    return {
        "files": done,
        "files_requested": count,
        "bytes": done * size,
        "seconds": secs,
        "files_s": done / secs,
        "open_p50_ms": statistics.median(opens),
        "write_p50_ms": statistics.median(writes),
        "close_p50_ms": statistics.median(closes),
        "close_p99_ms": percentile(closes, 0.99),
        "close_max_ms": closes[-1],
        "end_wall": end_wall,
    }


def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["kind"] == "many":
        return many_pass(
            spec["dir"], int(spec["count"]), int(spec["size"]), int(spec["first_id"]),
            int(spec["threads"]), bool(spec["fsync"]),
            None if spec.get("budget_s") is None else float(spec["budget_s"]),
        )  # fmt: skip
    if spec["kind"] == "large":
        return large_pass(spec["path"], int(spec["file_id"]), int(spec["size"]))
    if spec["kind"] == "small":
        budget = spec.get("budget_s")
        return small_pass(
            spec["dir"], int(spec["count"]), int(spec["size"]), int(spec["first_id"]),
            None if budget is None else float(budget),
        )  # fmt: skip
    raise ValueError(f"unknown pass kind {spec['kind']!r}")


def main() -> int:
    result = run_spec(json.load(sys.stdin))
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
