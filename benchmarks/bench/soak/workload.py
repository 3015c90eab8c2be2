"""The soak's workload: training-style readers on both mounts, a checkpoint writer on one.

Readers go through the data set in a fresh random order each epoch, read every file
whole and check its crc32; after each file they drop its pages from the kernel's page
cache (``POSIX_FADV_DONTNEED``), so every read reaches the mount. The writer writes a
checkpoint of a few MiB every ``interval`` seconds (write, fsync, close), then the same
bytes as ``latest.tmp`` renamed over ``latest.bin``; every file whose close succeeded is
recorded with its sha256, which the final check compares with the bucket.

Every operation is logged (``OpLog``) with its start, end and error; which failures
were allowed is decided afterwards, against the fault windows (``faults.classify``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

CHUNK = 1 << 20


@dataclass(frozen=True)
class Dataset:
    """``small`` files of ``small_size`` bytes and ``large`` of ``large_size``, under data/."""

    small: int
    small_size: int
    large: int
    large_size: int

    def keys(self) -> list[str]:
        return [f"data/small/s{i:04d}.bin" for i in range(self.small)] + [
            f"data/large/l{i:02d}.bin" for i in range(self.large)
        ]

    def size_of(self, key: str) -> int:
        return self.large_size if "/large/" in key else self.small_size

    @property
    def total_bytes(self) -> int:
        return self.small * self.small_size + self.large * self.large_size

    def populate(self, put: Callable[[str, bytes], None], seed: int) -> dict[str, int]:
        """Write every object with ``put`` (8 at once); return each key's crc32."""

        def one(key: str) -> tuple[str, int]:
            data = random.Random(f"{seed}:{key}").randbytes(self.size_of(key))
            put(key, data)
            return key, zlib.crc32(data)

        with ThreadPoolExecutor(8) as pool:
            return dict(pool.map(one, self.keys()))


@dataclass(frozen=True)
class Op:
    kind: str  # "read", "write" (create, write, fsync, close) or "rename"
    mount: str  # "writer" or "reader"
    start: float  # seconds since the soak's start
    end: float
    path: str
    error: str | None = None  # None: it succeeded
    checksum_mismatch: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class OpLog:
    t0: float
    ops: list[Op] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def add(self, op: Op) -> None:
        with self._lock:
            self.ops.append(op)

    def snapshot(self) -> list[Op]:
        with self._lock:
            return list(self.ops)


def describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.errno is not None:
        return f"{errno.errorcode.get(e.errno, e.errno)}: {e.strerror}"
    return f"{type(e).__name__}: {e}"


def read_whole(path: Path) -> int:
    """The crc32 of the file, read in 1 MiB pieces; its pages dropped afterwards."""
    crc = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while chunk := os.read(fd, CHUNK):
            crc = zlib.crc32(chunk, crc)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return crc


def reader_loop(
    log: OpLog, mount: str, root: Path, crcs: dict[str, int], seed: int, stop: threading.Event
) -> None:
    """Epoch after epoch over ``crcs``' keys in a random order, until ``stop``."""
    rng = random.Random(seed)
    keys = sorted(crcs)
    while not stop.is_set():
        rng.shuffle(keys)
        for key in keys:
            if stop.is_set():
                return
            start = log.now()
            error: str | None = None
            mismatch = False
            try:
                if read_whole(root / key) != crcs[key]:
                    error, mismatch = "checksum mismatch", True
            except OSError as e:
                error = describe(e)
            log.add(Op("read", mount, start, log.now(), key, error, mismatch))
            if error is not None:
                stop.wait(0.2)  # no busy loop while a fault lasts


@dataclass
class Checkpoints:
    """Every checkpoint file whose close (and rename, for latest.bin) succeeded."""

    closed: dict[str, tuple[str, int]] = field(default_factory=dict)  # key: (sha256, size)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, key: str, digest: str, size: int) -> None:
        with self._lock:
            self.closed[key] = (digest, size)

    def forget(self, key: str) -> None:
        with self._lock:
            self.closed.pop(key, None)

    def rename(self, old: str, new: str) -> None:
        with self._lock:
            self.closed[new] = self.closed.pop(old)

    def snapshot(self) -> dict[str, tuple[str, int]]:
        with self._lock:
            return dict(self.closed)


def write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view[:CHUNK]) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def writer_loop(
    log: OpLog,
    root: Path,
    ckpts: Checkpoints,
    interval: float,
    sizes: tuple[int, int],
    seed: int,
    stop: threading.Event,
) -> None:
    """A checkpoint every ``interval`` seconds under ``root``/ckpt, until ``stop``."""
    # A trainer lists its checkpoints first, to resume from the latest; the listing also
    # tells the mount which names are free, so it can create them while the tree is away.
    os.listdir(root / "ckpt")
    rng = random.Random(seed)
    step = 0
    while not stop.wait(interval):
        step += 1
        data = rng.randbytes(rng.randint(*sizes))
        digest = hashlib.sha256(data).hexdigest()
        written = False
        for key in (f"ckpt/step-{step:05d}.bin", "ckpt/latest.tmp"):
            written = _timed(log, "write", key, partial(write_file, root / key, data))
            if written:
                ckpts.record(key, digest, len(data))
            else:  # its bytes are whatever the failed write left: nothing was promised
                ckpts.forget(key)
        if written and _timed(log, "rename", "ckpt/latest.bin", lambda: _rename(root)):
            ckpts.rename("ckpt/latest.tmp", "ckpt/latest.bin")


def _rename(root: Path) -> None:
    os.rename(root / "ckpt/latest.tmp", root / "ckpt/latest.bin")


def _timed(log: OpLog, kind: str, key: str, action: Callable[[], None]) -> bool:
    """Run one writer operation and log it; whether it succeeded."""
    start = log.now()
    error: str | None = None
    try:
        action()
    except OSError as e:
        error = describe(e)
    log.add(Op(kind, "writer", start, log.now(), key, error))
    return error is None
