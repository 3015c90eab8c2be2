"""What training code does with ``cloudfs://``, over a volume in a bucket of the test S3
server: pyarrow and pandas read and write Parquet, and a DataLoader with 4 forked
workers reads samples through a filesystem object its parent already used."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cloudfs.fsspec import CloudFileSystem
from testkit.servers import S3Server
from testkit.tree_server import TreeServer

pd = pytest.importorskip("pandas", reason="needs pandas (the [test] extra)")

_buckets = itertools.count()


@pytest.fixture
def s3_volume(tree: TreeServer, s3_server: S3Server, aws_env: None) -> str:
    bucket = f"fsspec-{os.getpid()}-{next(_buckets)}"
    s3_server.client().create_bucket(Bucket=bucket)
    return tree.new_volume(f"s3://{bucket}/data").rsplit("/", 1)[1]


@pytest.fixture
def s3fs(tree: TreeServer, s3_server: S3Server, aws_env: None) -> Iterator[CloudFileSystem]:
    fs = CloudFileSystem(
        meta_server=tree.address, s3_endpoint=s3_server.endpoint, skip_instance_cache=True
    )
    yield fs
    fs.close()


def test_parquet_round_trip_with_pyarrow_and_pandas(
    s3fs: CloudFileSystem, s3_volume: str, tree: TreeServer, s3_server: S3Server
) -> None:
    table = pa.table({"id": list(range(10_000)), "label": [f"x{i % 7}" for i in range(10_000)]})
    path = f"{s3_volume}/tables/train.parquet"
    pq.write_table(table, path, filesystem=s3fs, row_group_size=2_000)
    assert pq.read_table(path, filesystem=s3fs).equals(table)
    assert pq.read_table(path, filesystem=s3fs, columns=["label"]).num_rows == 10_000
    options = {"meta_server": tree.address, "s3_endpoint": s3_server.endpoint}
    frame = pd.read_parquet(f"cloudfs://{path}", storage_options=options)
    assert frame["id"].sum() == sum(range(10_000))
    frame.head(3).to_parquet(f"cloudfs://{s3_volume}/tables/head.parquet", storage_options=options)
    assert pq.read_table(f"{s3_volume}/tables/head.parquet", filesystem=s3fs).num_rows == 3
    key = "data/tables/train.parquet"  # an ordinary object under the volume's prefix
    bucket = s3_server.client().list_buckets()["Buckets"][-1]["Name"]
    assert s3_server.client().head_object(Bucket=bucket, Key=key)["ContentLength"] > 0


class Samples:
    """A map-style dataset of files, holding the filesystem object (as datasets do)."""

    def __init__(self, fs: CloudFileSystem, paths: list[str]) -> None:
        self.fs = fs
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[int, bytes, int]:
        return i, self.fs.cat_file(self.paths[i]), os.getpid()


def test_dataloader_with_four_forked_workers(s3fs: CloudFileSystem, s3_volume: str) -> None:
    torch_data = pytest.importorskip("torch.utils.data", reason="needs PyTorch")
    files = {f"{s3_volume}/train/{i:03d}.bin": os.urandom(1000 + i) for i in range(64)}
    s3fs.pipe(files)
    paths = sorted(files)
    assert s3fs.cat_file(paths[0]) == files[paths[0]]  # the parent's channels are in use
    loader = torch_data.DataLoader(
        Samples(s3fs, paths),
        batch_size=4,
        num_workers=4,
        multiprocessing_context="fork",
        collate_fn=lambda batch: batch,
    )
    for epoch in range(2):  # new workers each epoch, each forked from the parent
        seen: dict[int, bytes] = {}
        pids: set[int] = set()
        for batch in loader:
            for i, data, pid in batch:
                seen[i] = data
                pids.add(pid)
        assert len(seen) == 64, f"epoch {epoch}"
        assert all(seen[i] == files[p] for i, p in enumerate(paths))
        assert len(pids) == 4 and os.getpid() not in pids
    assert s3fs.cat_file(paths[1]) == files[paths[1]]  # the parent still works after
