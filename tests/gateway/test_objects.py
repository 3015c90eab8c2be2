"""PutObject, GetObject (ranges, conditions), HeadObject, DeleteObject(s), CopyObject
through the real gateway, driven by boto3."""

from __future__ import annotations

import os

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Volume


def error_code(e: pytest.ExceptionInfo[ClientError]) -> str:
    return str(e.value.response["Error"]["Code"])


def test_put_get_head_roundtrip(s3, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    data = os.urandom(3 * 1024 * 1024 + 17)
    put = s3.put_object(Bucket=volume.name, Key="train/shard-0.bin", Body=data)
    got = s3.get_object(Bucket=volume.name, Key="train/shard-0.bin")
    assert got["Body"].read() == data
    assert got["ETag"] == put["ETag"]
    assert got["ContentLength"] == len(data)
    head = s3.head_object(Bucket=volume.name, Key="train/shard-0.bin")
    assert head["ContentLength"] == len(data) and head["ETag"] == put["ETag"]
    assert volume.local_dir is not None
    assert (volume.local_dir / "train" / "shard-0.bin").read_bytes() == data  # in the UFS


def test_ranges(s3, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    data = bytes(range(256)) * 40
    s3.put_object(Bucket=volume.name, Key="r.bin", Body=data)
    get = lambda r: s3.get_object(Bucket=volume.name, Key="r.bin", Range=r)  # noqa: E731
    part = get("bytes=10-19")
    assert part["Body"].read() == data[10:20]
    assert part["ContentRange"] == f"bytes 10-19/{len(data)}"
    assert part["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert get("bytes=10000-")["Body"].read() == data[10000:]
    assert get("bytes=-5")["Body"].read() == data[-5:]
    assert get("bytes=0-999999")["Body"].read() == data
    whole = get("bytes=abc")  # malformed: ignored, as S3 does
    assert whole["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert whole["Body"].read() == data
    with pytest.raises(ClientError) as e:
        get(f"bytes={len(data)}-")
    assert error_code(e) == "InvalidRange"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 416
    assert (
        e.value.response["ResponseMetadata"]["HTTPHeaders"]["content-range"]
        == f"bytes */{len(data)}"
    )


def test_conditions(s3, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    etag = s3.put_object(Bucket=volume.name, Key="c", Body=b"x")["ETag"]
    assert s3.get_object(Bucket=volume.name, Key="c", IfMatch=etag)["Body"].read() == b"x"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=volume.name, Key="c", IfMatch='"nope"')
    assert error_code(e) == "PreconditionFailed"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=volume.name, Key="c", IfNoneMatch=etag)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=volume.name, Key="c", Body=b"y", IfNoneMatch="*")
    assert error_code(e) == "PreconditionFailed"


def test_missing_and_directories(s3, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    s3.put_object(Bucket=volume.name, Key="d/file", Body=b"1")
    for key in ("nothing", "d", "d/file/under"):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=volume.name, Key=key)
        assert error_code(e) == "NoSuchKey"
    s3.put_object(Bucket=volume.name, Key="empty/", Body=b"")  # a directory marker: mkdir
    assert volume.local_dir is not None
    assert (volume.local_dir / "empty").is_dir()
    assert s3.head_object(Bucket=volume.name, Key="empty/")["ContentLength"] == 0


def test_delete(s3, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    s3.put_object(Bucket=volume.name, Key="a/b", Body=b"1")
    assert (
        s3.delete_object(Bucket=volume.name, Key="a/b")["ResponseMetadata"]["HTTPStatusCode"] == 204
    )
    s3.delete_object(Bucket=volume.name, Key="a/b")  # absent: still 204
    assert volume.local_dir is not None
    assert not (volume.local_dir / "a").exists()  # emptied by the delete: gone, as in S3
    s3.put_object(Bucket=volume.name, Key="keep/x", Body=b"1")
    s3.put_object(Bucket=volume.name, Key="keep/sub/y", Body=b"1")
    s3.delete_object(Bucket=volume.name, Key="keep/")  # a non-empty directory: stays
    s3.delete_object(Bucket=volume.name, Key="keep/sub/y")
    assert (volume.local_dir / "keep" / "x").exists()
    assert not (volume.local_dir / "keep" / "sub").exists()
    keys = [f"many/{i}" for i in range(30)]
    for key in keys:
        s3.put_object(Bucket=volume.name, Key=key, Body=key.encode())
    result = s3.delete_objects(
        Bucket=volume.name,
        Delete={"Objects": [{"Key": k} for k in [*keys, "a//b", "never"]]},
    )
    assert sorted(d["Key"] for d in result["Deleted"]) == sorted([*keys, "never"])
    assert [(e["Key"], e["Code"]) for e in result["Errors"]] == [("a//b", "InvalidArgument")]
    quiet = s3.delete_objects(Bucket=volume.name, Delete={"Objects": [{"Key": "x"}], "Quiet": True})
    assert "Deleted" not in quiet


def test_copy_within_and_across_volumes(s3, volume: Volume, tree) -> None:  # type: ignore[no-untyped-def]
    from tests.gateway.conftest import world_traversable_tmpdir

    other_dir = world_traversable_tmpdir("cloudfs-gateway-other-")
    other = tree.new_volume(f"file://{other_dir}").rsplit("/", 1)[1]
    data = os.urandom(2 * 1024 * 1024 + 3)
    s3.put_object(Bucket=volume.name, Key="src/a b+c.bin", Body=data)
    s3.copy_object(
        Bucket=volume.name,
        Key="dst/copy.bin",
        CopySource={"Bucket": volume.name, "Key": "src/a b+c.bin"},
    )
    assert s3.get_object(Bucket=volume.name, Key="dst/copy.bin")["Body"].read() == data
    s3.copy_object(Bucket=other, Key="x.bin", CopySource=f"{volume.name}/src/a b+c.bin")
    assert (other_dir / "x.bin").read_bytes() == data
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=other, Key="y", CopySource=f"{volume.name}/missing")
    assert error_code(e) == "NoSuchKey"


def test_volume_over_s3(s3, s3_volume: Volume, s3_server, s3_bucket: str) -> None:  # type: ignore[no-untyped-def]
    """A volume whose UFS is itself an S3 bucket: objects land under its prefix there."""
    data = os.urandom(2 * 1024 * 1024 + 9)
    s3.put_object(Bucket=s3_volume.name, Key="x/y.bin", Body=data)
    upstream = s3_server.client().get_object(Bucket=s3_bucket, Key="data/x/y.bin")
    assert upstream["Body"].read() == data
    assert (
        s3.get_object(Bucket=s3_volume.name, Key="x/y.bin", Range="bytes=1048570-1048580")[
            "Body"
        ].read()
        == data[1048570:1048581]
    )
    listed = s3.list_objects_v2(Bucket=s3_volume.name, Prefix="x/")["Contents"]
    assert [(c["Key"], c["Size"]) for c in listed] == [("x/y.bin", len(data))]


def test_presigned_get(s3, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    import urllib.request

    s3.put_object(Bucket=volume.name, Key="p", Body=b"presigned")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": volume.name, "Key": "p"})
    assert urllib.request.urlopen(url, timeout=10).read() == b"presigned"


def test_client_hanging_up_mid_get_is_routine(s3, volume: Volume, gateway) -> None:  # type: ignore[no-untyped-def]
    """s3a aborts a GET's stream when it seeks away: the gateway logs one line that the
    client left (no traceback, no InternalError) and goes on serving."""
    import socket
    import struct
    import time
    from urllib.parse import urlsplit

    data = os.urandom(24 * 1024 * 1024)  # more than loopback's socket buffers hold
    s3.put_object(Bucket=volume.name, Key="big.bin", Body=data)
    url = urlsplit(
        s3.generate_presigned_url("get_object", Params={"Bucket": volume.name, "Key": "big.bin"})
    )
    start = gateway.log_path.stat().st_size
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(f"GET {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode())
        got = b""
        while len(got) < 256 * 1024:
            chunk = sock.recv(64 * 1024)
            assert chunk, got[:300]
            got += chunk
        assert got.startswith(b"HTTP/1.1 200 ")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
    deadline = time.monotonic() + 15
    while "client left" not in gateway.log()[start:] and time.monotonic() < deadline:
        time.sleep(0.05)
    logged = gateway.log()[start:]
    assert "client left" in logged, logged
    assert "Traceback" not in logged and " 500" not in logged, logged
    s3.put_object(Bucket=volume.name, Key="small", Body=b"still here")
    assert s3.get_object(Bucket=volume.name, Key="small")["Body"].read() == b"still here"
