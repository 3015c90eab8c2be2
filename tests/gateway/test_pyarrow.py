"""``pyarrow.fs.S3FileSystem`` (the AWS C++ SDK) against the real gateway: Parquet
written and read back, recursive listings, large streamed writes (multipart)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

from tests.gateway.conftest import ACCESS_KEY, SECRET_KEY, Gateway, Volume


@pytest.fixture
def arrow(gateway: Gateway) -> fs.S3FileSystem:
    return fs.S3FileSystem(
        endpoint_override=urlsplit(gateway.endpoint).netloc,
        scheme="http",
        access_key=ACCESS_KEY,
        secret_key=SECRET_KEY,
        region="us-east-1",
        allow_bucket_creation=False,
    )


def test_parquet_roundtrip(arrow: fs.S3FileSystem, volume: Volume) -> None:
    table = pa.table({"id": list(range(10_000)), "label": [f"l{i % 7}" for i in range(10_000)]})
    pq.write_table(table, f"{volume.name}/tables/t.parquet", filesystem=arrow)
    assert pq.read_table(f"{volume.name}/tables/t.parquet", filesystem=arrow).equals(table)
    assert volume.local_dir is not None
    assert pq.read_table(volume.local_dir / "tables" / "t.parquet").equals(table)  # in the UFS
    dataset = pq.ParquetDataset(f"{volume.name}/tables", filesystem=arrow)
    assert dataset.read().num_rows == 10_000


def test_listing_and_streams(arrow: fs.S3FileSystem, volume: Volume) -> None:
    data = os.urandom(12 * 1024 * 1024 + 5)  # more than one part of the SDK's uploads
    with arrow.open_output_stream(f"{volume.name}/big/blob.bin") as out:
        out.write(data)
    for i in range(3):
        with arrow.open_output_stream(f"{volume.name}/small/{i}.txt") as out:
            out.write(b"x" * i)
    arrow.create_dir(f"{volume.name}/made")
    infos = arrow.get_file_info(fs.FileSelector(volume.name, recursive=True))
    found = {i.path: (i.type, i.size) for i in infos}
    b = volume.name
    assert found[f"{b}/big/blob.bin"] == (fs.FileType.File, len(data))
    assert found[f"{b}/small/2.txt"] == (fs.FileType.File, 2)
    assert found[f"{b}/big"][0] == fs.FileType.Directory
    assert found[f"{b}/made"][0] == fs.FileType.Directory
    with arrow.open_input_file(f"{b}/big/blob.bin") as f:
        f.seek(7 * 1024 * 1024)
        assert f.read(1000) == data[7 * 1024 * 1024 : 7 * 1024 * 1024 + 1000]
    arrow.delete_file(f"{b}/small/0.txt")
    assert arrow.get_file_info(f"{b}/small/0.txt").type == fs.FileType.NotFound
    arrow.delete_dir(f"{b}/small")
    assert arrow.get_file_info(f"{b}/small").type == fs.FileType.NotFound
    with pytest.raises(FileNotFoundError):
        arrow.open_input_file(f"{b}/nothing")
