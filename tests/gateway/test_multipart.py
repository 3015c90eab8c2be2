"""Multipart uploads through the real gateway: boto3's transfer manager and the
low-level calls, with S3's refusals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from tests.gateway.conftest import Volume

MiB = 1024 * 1024


def code(e: pytest.ExceptionInfo[ClientError]) -> str:
    return str(e.value.response["Error"]["Code"])


def test_upload_file_in_parts(s3, volume: Volume, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = os.urandom(11 * MiB + 123)
    source = tmp_path / "big.bin"
    source.write_bytes(data)
    config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    s3.upload_file(str(source), volume.name, "ckpt/big.bin", Config=config)
    assert volume.local_dir is not None
    assert (volume.local_dir / "ckpt" / "big.bin").read_bytes() == data
    target = tmp_path / "back.bin"
    s3.download_file(volume.name, "ckpt/big.bin", str(target), Config=config)  # ranged GETs
    assert target.read_bytes() == data
    assert s3.list_multipart_uploads(Bucket=volume.name).get("Uploads", []) == []


def test_low_level_calls_and_refusals(s3, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    b, k = volume.name, "parts/obj"
    upload = s3.create_multipart_upload(Bucket=b, Key=k)["UploadId"]
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=b)["Uploads"]] == [upload]
    one, two, tail = os.urandom(5 * MiB), os.urandom(5 * MiB), b"tail"
    e2 = s3.upload_part(Bucket=b, Key=k, UploadId=upload, PartNumber=2, Body=two)["ETag"]
    e1 = s3.upload_part(Bucket=b, Key=k, UploadId=upload, PartNumber=1, Body=one)["ETag"]
    e3 = s3.upload_part(Bucket=b, Key=k, UploadId=upload, PartNumber=3, Body=tail)["ETag"]
    small = s3.upload_part(Bucket=b, Key=k, UploadId=upload, PartNumber=4, Body=b"x")["ETag"]
    listed = s3.list_parts(Bucket=b, Key=k, UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in listed] == [
        (1, 5 * MiB),
        (2, 5 * MiB),
        (3, 4),
        (4, 1),
    ]

    def complete(parts: list[tuple[int, str]]) -> dict:  # type: ignore[type-arg]
        return s3.complete_multipart_upload(  # type: ignore[no-any-return]
            Bucket=b,
            Key=k,
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]},
        )

    with pytest.raises(ClientError) as e:
        complete([(2, e2), (1, e1)])
    assert code(e) == "InvalidPartOrder"
    with pytest.raises(ClientError) as e:
        complete([(1, e1), (2, '"0123"')])
    assert code(e) == "InvalidPart"
    with pytest.raises(ClientError) as e:
        complete([(1, e1), (7, e1)])
    assert code(e) == "InvalidPart"
    with pytest.raises(ClientError) as e:
        complete([(1, e1), (3, e3), (4, small)])  # part 3 is 4 bytes and not the last
    assert code(e) == "EntityTooSmall"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=b, Key=k)  # nothing visible before the Complete
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=b, Key=k, UploadId=upload, PartNumber=10001, Body=b"x")
    assert code(e) == "InvalidArgument"
    done = complete([(1, e1), (2, e2), (3, e3)])
    got = s3.get_object(Bucket=b, Key=k)
    assert got["Body"].read() == one + two + tail
    assert got["ETag"] == done["ETag"]
    with pytest.raises(ClientError) as e:  # completed: the upload is gone
        complete([(1, e1), (2, e2), (3, e3)])
    assert code(e) == "NoSuchUpload"


def test_abort_and_unknown_uploads(s3, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    b = volume.name
    upload = s3.create_multipart_upload(Bucket=b, Key="gone")["UploadId"]
    s3.upload_part(Bucket=b, Key="gone", UploadId=upload, PartNumber=1, Body=b"abc")
    s3.abort_multipart_upload(Bucket=b, Key="gone", UploadId=upload)
    for call in (
        lambda: s3.upload_part(Bucket=b, Key="gone", UploadId=upload, PartNumber=1, Body=b"a"),
        lambda: s3.list_parts(Bucket=b, Key="gone", UploadId=upload),
        lambda: s3.abort_multipart_upload(Bucket=b, Key="gone", UploadId="deadbeef"),
        lambda: s3.list_parts(Bucket=b, Key="other-key", UploadId=upload),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert code(e) == "NoSuchUpload"
    assert "Contents" not in s3.list_objects_v2(Bucket=b)


def test_upload_part_copy(s3, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    b = volume.name
    src = os.urandom(6 * MiB)
    s3.put_object(Bucket=b, Key="src", Body=src)
    upload = s3.create_multipart_upload(Bucket=b, Key="joined")["UploadId"]
    parts = []
    for n, span in ((1, f"bytes=0-{5 * MiB - 1}"), (2, f"bytes={5 * MiB}-{6 * MiB - 1}")):
        result = s3.upload_part_copy(
            Bucket=b,
            Key="joined",
            UploadId=upload,
            PartNumber=n,
            CopySource={"Bucket": b, "Key": "src"},
            CopySourceRange=span,
        )
        parts.append({"PartNumber": n, "ETag": result["CopyPartResult"]["ETag"]})
    s3.complete_multipart_upload(
        Bucket=b, Key="joined", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    assert s3.get_object(Bucket=b, Key="joined")["Body"].read() == src
