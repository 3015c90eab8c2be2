"""URI parsing for ``cloudfs mount``: every bad URI is a one-line UsageError."""

from __future__ import annotations

import pytest

from cloudfs.config import S3Config
from cloudfs.errors import UsageError
from cloudfs.ufs.factory import open_store, parse_uri, store_id, validate_uri
from cloudfs.ufs.local import LocalObjectStore
from cloudfs.ufs.s3 import S3ObjectStore


def test_file_uri_opens_local_store() -> None:
    store = open_store("file:///data/train/", S3Config())
    assert isinstance(store, LocalObjectStore)
    assert store.uri == "file:///data/train"
    assert isinstance(open_store("file://localhost/tmp", S3Config()), LocalObjectStore)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket", "s3://bucket"),
        ("s3://bucket/", "s3://bucket"),
        ("s3://bucket/a/b/", "s3://bucket/a/b"),
        ("s3://bucket//a/b//", "s3://bucket/a/b"),
        ("S3://bucket/x", "s3://bucket/x"),
    ],
)
def test_s3_uri_opens_s3_store(uri: str, expected: str) -> None:
    store = open_store(uri, S3Config(endpoint_url="http://127.0.0.1:9"))
    assert isinstance(store, S3ObjectStore)
    assert store.uri == expected


@pytest.mark.parametrize(
    ("uri", "needle"),
    [
        ("/plain/path", "not a storage URI"),
        ("relative/dir", "not a storage URI"),
        ("file://relative/dir", "host"),
        ("file:relative", "not a storage URI"),
        ("s3://", "no bucket"),
        ("s3:///prefix", "no bucket"),
        ("s3://bad bucket/x", "invalid S3 bucket name"),
        ("s3://bucket/x?versionId=1", "query"),
        ("hdfs://namenode:8020/data", "hdfs:// is not supported"),
        ("gs://bucket", "unsupported storage scheme 'gs://'"),
        ("http://example.com/x", "unsupported storage scheme"),
    ],
)
def test_bad_uris_are_usage_errors(uri: str, needle: str) -> None:
    with pytest.raises(UsageError) as info:
        open_store(uri, S3Config())
    message = str(info.value)
    assert needle in message
    assert "\n" not in message


def test_parse_uri_fields() -> None:
    parsed = parse_uri("s3://bkt/some/prefix/")
    assert (parsed.scheme, parsed.location, parsed.prefix) == ("s3", "bkt", "some/prefix")
    assert parse_uri("file:///a/./b/../c/").location == "/a/c"


def test_store_id_is_stable_short_and_normalized() -> None:
    ident = store_id("s3://bucket/prefix")
    assert len(ident) == 16
    assert int(ident, 16) >= 0
    assert ident == store_id("s3://bucket/prefix/")
    assert ident == store_id("s3://bucket//prefix")
    assert ident != store_id("s3://bucket/other")
    assert ident != store_id("s3://bucket")
    assert store_id("file:///data/x/") == store_id("file:///data/x")
    assert store_id("file:///data/x") != store_id("file:///data/y")
    # A pinned value: cache directories must keep their names across upgrades.
    assert store_id("s3://bucket") == "f6404b9c72d84113"


def test_store_id_distinguishes_endpoints() -> None:
    a = store_id("s3://bucket", endpoint_url="http://minio-a:9000")
    b = store_id("s3://bucket", endpoint_url="http://minio-b:9000")
    assert a != b
    assert a == store_id("s3://bucket", endpoint_url="http://minio-a:9000/")


def test_store_id_and_validate_reject_bad_uri() -> None:
    with pytest.raises(UsageError):
        store_id("ftp://x")
    with pytest.raises(UsageError):
        validate_uri("s3://")
    validate_uri("s3://bucket/prefix")
