"""A PyTorch DataLoader epoch over small files (imported only in a pass's child process)."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset


class FileDataset(Dataset[torch.Tensor]):
    """Item i: open and read file i; the sample is its length as a tensor."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        with open(self.paths[index], "rb") as f:
            data = f.read()
        return torch.tensor(len(data))


def run_epochs(paths: list[str], workers: int, epochs: int, batch_size: int) -> dict[str, Any]:
    torch.set_num_threads(1)
    loader = DataLoader(
        FileDataset(paths), batch_size=batch_size, num_workers=workers, shuffle=False
    )
    seconds: list[float] = []
    total = 0
    for _ in range(epochs):
        start = time.perf_counter()
        total = 0
        for batch in loader:
            total += int(batch.sum())
        seconds.append(time.perf_counter() - start)
    return {"epoch_seconds": seconds, "bytes_per_epoch": total, "files": len(paths)}
