"""The measured passes.

Each pass runs in a child process (``python3 -m bench.workloads``, a JSON spec on stdin,
a JSON result on stdout) so that a pass stuck in a FUSE request is bounded: past its time
limit the parent tears the mount down and kills the child's whole session.

Spec kinds:

- ``read``: ``{"kind": "read", "paths": [...], "readers": N}`` — read every file to the end
  in 1 MiB requests; with N > 1, N threads take files from a shared queue.
- ``readcrc``: the same as ``read``, and the crc32 of every file's bytes, in the order of
  ``paths`` (``"crcs"``), so the parent can check what each mount served.
- ``liststat``: ``{"kind": "liststat", "dirs": [...]}`` — ``os.scandir`` every directory,
  then ``os.stat`` every listed path.
- ``scandirstat``: ``{"kind": "scandirstat", "dirs": [...]}`` — ``os.scandir`` each directory
  and ``entry.stat()`` each entry as it is listed (what a training script's file walk does).
- ``dataloader``: ``{"kind": "dataloader", "paths": [...], "workers": N, "epochs": E,
  "batch_size": B}`` — a PyTorch DataLoader over a Dataset that opens and reads each file.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHUNK = 1 << 20
MiB = 1 << 20
BENCH_DIR = Path(__file__).resolve().parent.parent  # benchmarks/, so `bench` is importable


class PassFailed(RuntimeError):
    """A pass failed or ran past its time limit."""


# --- the child side -------------------------------------------------------------------


def read_file(path: str) -> int:
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    total = 0
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(view):
            total += n
    return total


def read_pass(paths: list[str], readers: int) -> dict[str, Any]:
    start = time.perf_counter()
    if readers == 1:
        total = sum(read_file(p) for p in paths)
    else:
        with concurrent.futures.ThreadPoolExecutor(readers) as pool:
            total = sum(pool.map(read_file, paths))
    secs = time.perf_counter() - start
    return {
        "files": len(paths),
        "bytes": total,
        "seconds": secs,
        "mib_s": total / MiB / secs,
        "files_s": len(paths) / secs,
    }


def read_file_crc(path: str) -> tuple[int, int]:
    """(bytes read, crc32 of them): ``read_file`` with a checksum (zlib drops the GIL)."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    total = crc = 0
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(view):
            total += n
            crc = zlib.crc32(view[:n], crc)
    return total, crc


def readcrc_pass(paths: list[str], readers: int) -> dict[str, Any]:
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(readers) as pool:
        got = list(pool.map(read_file_crc, paths))
    secs = time.perf_counter() - start
    total = sum(n for n, _ in got)
    return {
        "files": len(paths),
        "bytes": total,
        "seconds": secs,
        "mib_s": total / MiB / secs,
        "files_s": len(paths) / secs,
        "crcs": [crc for _, crc in got],
    }


def liststat_pass(dirs: list[str]) -> dict[str, Any]:
    start = time.perf_counter()
    paths: list[str] = []
    for d in dirs:
        with os.scandir(d) as it:
            paths.extend(entry.path for entry in it)
    listed = time.perf_counter()
    for p in paths:
        os.stat(p)
    done = time.perf_counter()
    return {
        "files": len(paths),
        "list_seconds": listed - start,
        "stat_seconds": done - listed,
        "stat_s": len(paths) / (done - listed),
        "liststat_s": len(paths) / (done - start),
    }


def scandir_stat_pass(dirs: list[str]) -> dict[str, Any]:
    start = time.perf_counter()
    files = 0
    for d in dirs:
        with os.scandir(d) as it:
            for entry in it:
                entry.stat()
                files += 1
    secs = time.perf_counter() - start
    return {"files": files, "seconds": secs, "stat_s": files / secs}


def dataloader_pass(paths: list[str], workers: int, epochs: int, batch_size: int) -> dict[str, Any]:
    from bench.torchload import run_epochs  # torch is imported only in this child

    return run_epochs(paths, workers, epochs, batch_size)


def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    kind = spec["kind"]
    if kind == "read":
        return read_pass(spec["paths"], int(spec["readers"]))
    if kind == "readcrc":
        return readcrc_pass(spec["paths"], int(spec["readers"]))
    if kind == "liststat":
        return liststat_pass(spec["dirs"])
    if kind == "scandirstat":
        return scandir_stat_pass(spec["dirs"])
    if kind == "dataloader":
        return dataloader_pass(
            spec["paths"], int(spec["workers"]), int(spec["epochs"]), int(spec["batch_size"])
        )
    raise ValueError(f"unknown pass kind {kind!r}")


def main() -> int:
    spec = json.load(sys.stdin)
    result = run_spec(spec)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


# --- the parent side ------------------------------------------------------------------


def run_pass(
    spec: dict[str, Any],
    timeout: float,
    on_timeout: Callable[[], None] | None = None,
    module: str = "bench.workloads",
) -> dict[str, Any]:
    """Run one pass in a child process; raise PassFailed on an error or past ``timeout``.

    ``module`` is the child's ``python3 -m`` module (``bench.writeload`` for the write passes).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = str(BENCH_DIR) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", module],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(json.dumps(spec).encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        if on_timeout is not None:
            on_timeout()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=30)
        raise PassFailed(f"{spec['kind']} pass ran past its limit of {timeout:.0f} s") from None
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise PassFailed(f"{spec['kind']} pass failed ({proc.returncode}): {' | '.join(tail)}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    sys.exit(main())
