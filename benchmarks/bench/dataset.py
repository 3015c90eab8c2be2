"""The benchmark data set: the same random bytes in the bucket and in a local-disk directory."""

from __future__ import annotations

import concurrent.futures
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MiB = 1 << 20
KiB = 1 << 10


@dataclass(frozen=True)
class DatasetSpec:
    large_count: int
    large_size: int
    small_count: int
    small_size: int
    small_dirs: int = 10

    @classmethod
    def full(cls) -> DatasetSpec:
        return cls(large_count=4, large_size=256 * MiB, small_count=5000, small_size=110 * KiB)

    @classmethod
    def quick(cls) -> DatasetSpec:
        return cls(large_count=4, large_size=32 * MiB, small_count=500, small_size=110 * KiB)

    def large_keys(self) -> list[str]:
        return [f"large/file{i:02d}.bin" for i in range(self.large_count)]

    def small_dir_keys(self) -> list[str]:
        return [f"small/d{d:02d}" for d in range(self.small_dirs)]

    def small_keys(self) -> list[str]:
        """Every small object, directory by directory (the order the passes read them in)."""
        return sorted(
            f"small/d{i % self.small_dirs:02d}/f{i:05d}.bin" for i in range(self.small_count)
        )

    @property
    def large_bytes(self) -> int:
        return self.large_count * self.large_size

    def describe(self) -> str:
        return (
            f"{self.large_count} x {self.large_size // MiB} MiB under large/, "
            f"{self.small_count:,} x {self.small_size // KiB} KiB in {self.small_dirs} "
            f"directories under small/"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def create(spec: DatasetSpec, client: Any, bucket: str, local_root: Path) -> float:
    """Write the data set to ``bucket`` and to ``local_root``; return the seconds it took."""
    start = time.monotonic()
    client.create_bucket(Bucket=bucket)
    for key in spec.large_keys():
        data = os.urandom(spec.large_size)
        _write_local(local_root / key, data)
        client.put_object(Bucket=bucket, Key=key, Body=data)
        del data

    def put_small(key: str) -> None:
        data = os.urandom(spec.small_size)
        _write_local(local_root / key, data)
        client.put_object(Bucket=bucket, Key=key, Body=data)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for _ in pool.map(put_small, spec.small_keys()):
            pass
    os.sync()
    return time.monotonic() - start


def _write_local(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
