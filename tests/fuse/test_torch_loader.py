"""CloudFSSampler through a real mount and a real DataLoader.

What the mount was told and what the loader read must be the same order: the
mount's idea of the job's position (``cloudfs stats``) moves exactly with the
samples the loader has delivered when one process reads in order, and the
mount's window fetched the files before the loader asked (prefetch hits).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch (the cloudfs[torch] extra)")

from torch.utils.data import DataLoader, Dataset, DistributedSampler  # noqa: E402

from cloudfs.torch import CloudFSSampler  # noqa: E402
from testkit.hints import stats_jobs  # noqa: E402
from testkit.mounts import Backing, mounted  # noqa: E402
from testkit.servers import S3Server  # noqa: E402

pytestmark = pytest.mark.fuse

FILES = 96
SIZE = 4096
BATCH = 8


class FileDataset(Dataset[tuple[int, bytes]]):
    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[int, bytes]:
        with open(self.paths[i], "rb") as f:
            return i, f.read()


@pytest.fixture
def dataset_mount(s3_server: S3Server) -> Any:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("mount tests need /dev/fuse and root")
    bucket = f"torch-{os.getpid()}"
    s3_server.client().create_bucket(Bucket=bucket)
    backing = Backing(uri=f"s3://{bucket}", s3=s3_server, bucket=bucket)
    data = {f"train/{i:04d}.bin": bytes([i % 251]) * SIZE for i in range(FILES)}
    for key, value in data.items():
        backing.write_object(key, value)
    with mounted(backing, ["--read-only", "--block-size", "64K"]) as mount:
        paths = [mount.root / key for key in sorted(data)]
        yield mount, paths, data


def _drop_kernel_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def _collate(batch: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    return batch


def test_the_mount_follows_the_loader_through_the_announced_order(dataset_mount: Any) -> None:
    mount, paths, data = dataset_mount
    sampler = CloudFSSampler(paths, seed=5, job="loader-test")
    loader = DataLoader(
        FileDataset(paths), batch_size=BATCH, sampler=sampler, num_workers=0, collate_fn=_collate
    )
    delivered: list[int] = []
    for n, batch in enumerate(loader, 1):
        for i, content in batch:
            assert content == data[f"train/{i:04d}.bin"]
            delivered.append(i)
        if n in (2, 7):  # one reader, in order: the mount's position is the samples read
            (job,) = stats_jobs(mount)
            assert job["job"] == "loader-test" and job["order_files"] == FILES
            assert job["position"] == len(delivered), job
    generator = torch.Generator()
    generator.manual_seed(5)
    assert delivered == torch.randperm(FILES, generator=generator).tolist()
    (job,) = stats_jobs(mount)
    assert job["position"] == FILES and job["read_files"] == FILES
    assert job["prefetched_bytes"] > 0  # the window ran ahead of the loader
    sampler.close()
    assert stats_jobs(mount) == []  # closing ends the job: it is listed as finished now


def test_workers_and_a_distributed_shard(dataset_mount: Any) -> None:
    """Two workers read out of order; a DistributedSampler's shard labels the job's rank."""
    mount, paths, _ = dataset_mount
    shard = DistributedSampler(range(FILES), num_replicas=2, rank=1, shuffle=True, seed=9)
    sampler = CloudFSSampler(paths, shard, job="ddp-test")
    loader = DataLoader(
        FileDataset(paths), batch_size=BATCH, sampler=sampler, num_workers=2, collate_fn=_collate
    )
    for epoch in range(2):
        # Dataset mode: the kernel serves what it still holds without asking the mount,
        # which then cannot follow; drop it, as a dataset larger than RAM would.
        _drop_kernel_caches()
        sampler.set_epoch(epoch)
        shard_order = list(shard)
        delivered = [i for batch in loader for i, _ in batch]
        assert delivered == shard_order  # the loader keeps the sampler's order
        (job,) = stats_jobs(mount)
        assert (job["job"], job["rank"], job["epoch"]) == ("ddp-test", 1, epoch)
        assert job["order_files"] == FILES // 2
        assert job["position"] == FILES // 2  # this epoch's
        assert job["read_files"] == (epoch + 1) * FILES // 2  # counted since the job began
    sampler.close()
