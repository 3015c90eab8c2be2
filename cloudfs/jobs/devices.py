"""GPU device indices for a job's workers: each worker with GPUs gets its own
disjoint set, exported as ``CUDA_VISIBLE_DEVICES`` and ``NVIDIA_VISIBLE_DEVICES``.

Pure. The indices a job holds are kept in its record (``JobRecord.devices``,
for its current attempt) so a restarted scheduler knows which are taken.
"""

from __future__ import annotations

from collections.abc import Iterable

Assignment = list[list[int]]  # per worker, its device indices


def assign(workers: int, per_worker: int, taken: Iterable[int], total: int | None) -> Assignment:
    """The lowest free indices, ``per_worker`` for each of ``workers``; ``[]`` for a
    job asking no GPUs. Raises ``LookupError`` if ``total`` leaves too few free."""
    if per_worker <= 0:
        return []
    busy = set(taken)
    need = workers * per_worker
    free: list[int] = []
    index = 0
    while len(free) < need:
        if total is not None and index >= total:
            raise LookupError(f"{need} GPUs asked, {len(free)} free of {total}")
        if index not in busy:
            free.append(index)
        index += 1
    return [free[w * per_worker : (w + 1) * per_worker] for w in range(workers)]


def visible(indices: Iterable[int]) -> str:
    """The value of ``CUDA_VISIBLE_DEVICES`` for ``indices``."""
    return ",".join(str(i) for i in indices)


def env(indices: Iterable[int]) -> dict[str, str]:
    value = visible(indices)
    return {"CUDA_VISIBLE_DEVICES": value, "NVIDIA_VISIBLE_DEVICES": value}
