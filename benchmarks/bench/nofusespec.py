"""The data set and the passes of ``benchmarks/without_fuse.py`` (issue 16).

Large: 8 x 64 MiB (moto reads the whole object for every ranged GET, so larger objects
would measure moto's CPU per range rather than the clients; see ../shared/BASELINE.md).
Small: 2,000 x 100 KiB, about an ImageNet JPEG, one 4 MiB block each. The same random
bytes go to the bucket and to a local directory (the local-disk system).

A pass reads every file of its phase: ``large-1`` the large files one after another,
``large-4`` four at a time, ``small-8`` the small files on 8 threads.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

KiB = 1 << 10
MiB = 1 << 20


@dataclass(frozen=True)
class Pass:
    name: str  # large-1, large-4, small-8
    phase: str  # large or small
    readers: int

    @property
    def stream(self) -> bool:
        """Large files are read in 1 MiB requests, small ones whole."""
        return self.phase == "large"


PASSES = (Pass("large-1", "large", 1), Pass("large-4", "large", 4), Pass("small-8", "small", 8))


@dataclass(frozen=True)
class NoFuseSpec:
    large_count: int = 8
    large_size: int = 64 * MiB
    small_count: int = 2000
    small_size: int = 100 * KiB
    small_dirs: int = 10

    @classmethod
    def full(cls) -> NoFuseSpec:
        return cls()

    @classmethod
    def quick(cls) -> NoFuseSpec:
        return cls(large_count=4, large_size=16 * MiB, small_count=200)

    def keys(self, phase: str) -> list[str]:
        if phase == "large":
            return [f"large/file{i:03d}.bin" for i in range(self.large_count)]
        return sorted(
            f"small/d{i % self.small_dirs:02d}/f{i:05d}.bin" for i in range(self.small_count)
        )

    def size(self, phase: str) -> int:
        return self.large_size if phase == "large" else self.small_size

    def phase_bytes(self, phase: str) -> int:
        return len(self.keys(phase)) * self.size(phase)

    def describe(self) -> str:
        return (
            f"{self.large_count} x {self.large_size // MiB} MiB under large/ "
            f"({self.phase_bytes('large') / MiB:,.0f} MiB), {self.small_count:,} x "
            f"{self.small_size // KiB} KiB in {self.small_dirs} directories under small/ "
            f"({self.phase_bytes('small') / MiB:,.0f} MiB)"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def populate(
    spec: NoFuseSpec, client: Any, bucket: str, local_root: Path
) -> tuple[float, dict[str, int]]:
    """Write the data set to the bucket and under ``local_root``; (seconds, crc32 per key)."""
    start = time.monotonic()
    client.create_bucket(Bucket=bucket)
    crcs: dict[str, int] = {}

    def put(key: str, size: int) -> None:
        data = os.urandom(size)
        crcs[key] = zlib.crc32(data)
        client.put_object(Bucket=bucket, Key=key, Body=data)
        path = local_root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    for key in spec.keys("large"):
        put(key, spec.large_size)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: put(k, spec.small_size), spec.keys("small")))
    return time.monotonic() - start, crcs
