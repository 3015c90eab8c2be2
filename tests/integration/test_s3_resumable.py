"""Resumable multipart uploads against the S3 server: a crash mid-upload resumes, not restarts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from cloudfs.config import S3Config
from cloudfs.errors import FsError, RemoteIOError
from cloudfs.ufs.s3 import S3ObjectStore
from testkit.servers import S3Server

MiB = 1024 * 1024


def store_for(server: S3Server, bucket: str) -> S3ObjectStore:
    config = S3Config(
        endpoint_url=server.endpoint, multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB
    )
    return S3ObjectStore(bucket, "", config)


def count_parts(store: S3ObjectStore, fail_after: int | None = None) -> list[int]:
    """Count ``upload_part`` calls; with ``fail_after``, the later ones fail like a dead link."""
    client: Any = store._client  # the test reaches into the one boto3 client on purpose
    real = client.upload_part
    calls: list[int] = []

    def upload_part(**kwargs: Any) -> Any:
        calls.append(kwargs["PartNumber"])
        if fail_after is not None and len(calls) > fail_after:
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
        return real(**kwargs)

    client.upload_part = upload_part
    return calls


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, s3_server: S3Server) -> None:
    """The test server's credentials, whatever this machine's AWS settings say."""
    for name, value in s3_server.env().items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)


@pytest.fixture
def big_file(tmp_path: Path) -> Path:
    path = tmp_path / "ckpt.bin"
    path.write_bytes(os.urandom(23 * MiB))  # five parts of 5 MiB, the last one short
    return path


def test_an_interrupted_upload_resumes_with_the_missing_parts_only(
    s3_server: S3Server, s3_bucket: str, big_file: Path, tmp_path: Path
) -> None:
    state = str(tmp_path / "upload.json")
    first = store_for(s3_server, s3_bucket)
    count_parts(first, fail_after=2)
    with pytest.raises(RemoteIOError):
        first.put_file("ckpt.bin", str(big_file), state)
    assert os.path.exists(state)

    second = store_for(s3_server, s3_bucket)  # a new process, as after kill -9
    calls = count_parts(second)
    info = second.put_file("ckpt.bin", str(big_file), state)
    held = s3_server.client().get_object(Bucket=s3_bucket, Key="ckpt.bin")["Body"].read()
    assert held == big_file.read_bytes() and info.size == len(held)
    assert 1 <= len(calls) <= 3  # at least the two parts done before the failure were kept
    assert not os.path.exists(state)


def test_an_upload_the_server_forgot_starts_over(
    s3_server: S3Server, s3_bucket: str, big_file: Path, tmp_path: Path
) -> None:
    state = str(tmp_path / "upload.json")
    first = store_for(s3_server, s3_bucket)
    count_parts(first, fail_after=1)
    with pytest.raises(RemoteIOError):
        first.put_file("ckpt.bin", str(big_file), state)
    client = s3_server.client()
    for upload in client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", []):
        client.abort_multipart_upload(
            Bucket=s3_bucket, Key=upload["Key"], UploadId=upload["UploadId"]
        )
    second = store_for(s3_server, s3_bucket)
    calls = count_parts(second)
    second.put_file("ckpt.bin", str(big_file), state)
    assert sorted(calls) == [1, 2, 3, 4, 5]
    assert client.get_object(Bucket=s3_bucket, Key="ckpt.bin")["Body"].read() == (
        big_file.read_bytes()
    )


def test_a_rewritten_file_does_not_reuse_old_parts(
    s3_server: S3Server, s3_bucket: str, big_file: Path, tmp_path: Path
) -> None:
    state = str(tmp_path / "upload.json")
    first = store_for(s3_server, s3_bucket)
    count_parts(first, fail_after=2)
    with pytest.raises(RemoteIOError):
        first.put_file("ckpt.bin", str(big_file), state)
    big_file.write_bytes(os.urandom(23 * MiB))  # same size, new bytes and mtime
    os.utime(big_file, ns=(1, 1))
    second = store_for(s3_server, s3_bucket)
    calls = count_parts(second)
    second.put_file("ckpt.bin", str(big_file), state)
    assert sorted(calls) == [1, 2, 3, 4, 5]
    held = s3_server.client().get_object(Bucket=s3_bucket, Key="ckpt.bin")["Body"].read()
    assert held == big_file.read_bytes()


def test_a_complete_whose_answer_was_lost_is_not_an_error(
    s3_server: S3Server, s3_bucket: str, big_file: Path
) -> None:
    """S3 assembled the object but the answer timed out; the retry finds no upload."""
    store = store_for(s3_server, s3_bucket)
    client: Any = store._client
    real = client.complete_multipart_upload

    def complete_then_lose_the_answer(**kwargs: Any) -> Any:
        real(**kwargs)
        return real(**kwargs)  # the retry: NoSuchUpload

    client.complete_multipart_upload = complete_then_lose_the_answer
    info = store.put_file("ckpt.bin", str(big_file))  # no state file: write-through
    held = s3_server.client().get_object(Bucket=s3_bucket, Key="ckpt.bin")["Body"].read()
    assert held == big_file.read_bytes() and info.size == len(held)


def test_a_vanished_upload_whose_object_is_not_ours_fails(
    s3_server: S3Server, s3_bucket: str, big_file: Path
) -> None:
    store = store_for(s3_server, s3_bucket)
    client: Any = store._client
    real = client.complete_multipart_upload

    def someone_else_won(**kwargs: Any) -> Any:
        client.abort_multipart_upload(
            Bucket=kwargs["Bucket"], Key=kwargs["Key"], UploadId=kwargs["UploadId"]
        )
        client.put_object(Bucket=kwargs["Bucket"], Key=kwargs["Key"], Body=b"other")
        return real(**kwargs)

    client.complete_multipart_upload = someone_else_won
    with pytest.raises(FsError):
        store.put_file("ckpt.bin", str(big_file))
