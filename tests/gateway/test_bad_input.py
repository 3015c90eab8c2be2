"""What the gateway refuses, with S3's own codes: bad signatures and keys, names a tree
cannot hold, malformed XML, and concurrent writers of one key (never a mix)."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

import boto3
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.gateway.conftest import ACCESS_KEY, SECRET_KEY, Gateway, Volume


def code(e: pytest.ExceptionInfo[ClientError]) -> str:
    return str(e.value.response["Error"]["Code"])


def client(gateway: Gateway, access: str, secret: str):  # type: ignore[no-untyped-def]
    return boto3.client(
        "s3",
        endpoint_url=gateway.endpoint,
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def signed(gateway: Gateway, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """A raw request signed as botocore signs one: for bodies boto3 would not send."""
    request = AWSRequest(method=method, url=gateway.endpoint + path, data=body)
    request.headers["x-amz-content-sha256"] = __import__("hashlib").sha256(body).hexdigest()
    S3SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1").add_auth(request)
    prepared = request.prepare()
    raw = urllib.request.Request(
        prepared.url, data=body or None, headers=dict(prepared.headers), method=method
    )
    try:
        with urllib.request.urlopen(raw, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_signatures(gateway: Gateway, volume: Volume) -> None:
    with pytest.raises(ClientError) as e:
        client(gateway, ACCESS_KEY, "wrong-secret").list_objects_v2(Bucket=volume.name)
    assert code(e) == "SignatureDoesNotMatch"
    with pytest.raises(ClientError) as e:
        client(gateway, "nobody", SECRET_KEY).put_object(Bucket=volume.name, Key="k", Body=b"1")
    assert code(e) == "InvalidAccessKeyId"
    status, body = 0, b""
    try:
        urllib.request.urlopen(f"{gateway.endpoint}/{volume.name}/k", timeout=10)
    except urllib.error.HTTPError as err:
        status, body = err.code, err.read()
    assert status == 403 and b"<Code>AccessDenied</Code>" in body


def test_keys_the_tree_cannot_hold(s3, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=volume.name, Key="k" * 1025, Body=b"1")
    assert code(e) == "KeyTooLongError"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=volume.name, Key="d/" + "k" * 1023)
    assert code(e) == "KeyTooLongError"
    for key in ("a//b", "a/./b", "../b", "a/.."):
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket=volume.name, Key=key, Body=b"1")
        assert code(e) == "InvalidArgument", key
        assert "POSIX" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=volume.name, Key="n" * 256, Body=b"1")
    assert code(e) == "KeyTooLongError"
    s3.put_object(Bucket=volume.name, Key="file", Body=b"1")
    with pytest.raises(ClientError) as e:  # a file cannot also be a directory
        s3.put_object(Bucket=volume.name, Key="file/under", Body=b"1")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    assert "Contents" in s3.list_objects_v2(Bucket=volume.name)
    assert [c["Key"] for c in s3.list_objects_v2(Bucket=volume.name)["Contents"]] == ["file"]


def test_malformed_xml(gateway: Gateway, s3, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    b = volume.name
    for body in (b"<Delete><Object>", b"not xml", b"<Other/>", b"<Delete></Delete>"):
        status, answer = signed(gateway, "POST", f"/{b}?delete", body)
        assert status == 400 and b"<Code>MalformedXML</Code>" in answer, body
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">'
        b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><Delete><Object><Key>&b;</Key></Object></Delete>'
    )
    status, answer = signed(gateway, "POST", f"/{b}?delete", bomb)
    assert status == 400 and b"<Code>MalformedXML</Code>" in answer
    upload = s3.create_multipart_upload(Bucket=b, Key="m")["UploadId"]
    status, answer = signed(gateway, "POST", f"/{b}/m?uploadId={upload}", b"<Complete")
    assert status == 400 and b"<Code>MalformedXML</Code>" in answer
    status, answer = signed(gateway, "GET", f"/{b}?list-type=2&max-keys=lots")
    assert status == 400 and b"<Code>InvalidArgument</Code>" in answer
    status, answer = signed(gateway, "GET", f"/{b}?list-type=2&continuation-token=%25%25")
    assert status == 400 and b"<Code>InvalidArgument</Code>" in answer


def test_concurrent_writers_of_one_key(s3, gateway: Gateway, volume: Volume) -> None:  # type: ignore[no-untyped-def]
    size = 1024 * 1024 + 7
    s3.put_object(Bucket=volume.name, Key="hot", Body=b"\0" * size)
    errors: list[BaseException] = []
    seen: set[int] = set()
    stop = threading.Event()

    def write(n: int) -> None:
        own = gateway.client()
        try:
            for _ in range(4):
                own.put_object(Bucket=volume.name, Key="hot", Body=bytes([n]) * size)
        except BaseException as e:
            errors.append(e)

    def read() -> None:
        own = gateway.client()
        try:
            while not stop.is_set():
                data = own.get_object(Bucket=volume.name, Key="hot")["Body"].read()
                assert len(data) == size and data == data[:1] * size, "a mix of two writes"
                seen.add(data[0])
        except ClientError as e:  # a read that met a newer version is refused, not mixed
            if e.response["Error"]["Code"] not in ("SlowDown", "InternalError"):
                errors.append(e)
        except BaseException as e:
            errors.append(e)

    writers = [threading.Thread(target=write, args=(n,)) for n in range(1, 5)]
    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert errors == []
    final = s3.get_object(Bucket=volume.name, Key="hot")["Body"].read()
    assert len(final) == size and final == final[:1] * size and final[0] in range(1, 5)
