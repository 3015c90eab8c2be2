"""ListObjectsV2 and V1 through the real gateway: S3's key order, prefixes, delimiters,
pagination with small pages, directory markers, URL encoding."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Volume

KEYS = sorted(
    [
        "a.txt",
        "a/b.txt",
        "a/c/d.txt",
        "a-b/x",
        "a0",
        "b/1",
        "b/2",
        "b/3/4",
        "sp ace+plus/é.bin",
        "z",
    ],
    key=lambda k: k.encode(),
)


@pytest.fixture
def filled(s3, volume: Volume) -> Volume:  # type: ignore[no-untyped-def]
    for key in KEYS:
        s3.put_object(Bucket=volume.name, Key=key, Body=key.encode())
    s3.put_object(Bucket=volume.name, Key="empty/", Body=b"")
    return volume


def all_v2(s3, bucket: str, **kwargs: object) -> tuple[list[str], list[str], int]:  # type: ignore[no-untyped-def]
    keys: list[str] = []
    prefixes: list[str] = []
    pages = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, **kwargs):
        pages += 1
        keys += [c["Key"] for c in page.get("Contents", [])]
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    return keys, prefixes, pages


def test_recursive_listing_is_in_s3_order(s3, filled: Volume) -> None:  # type: ignore[no-untyped-def]
    keys, prefixes, _ = all_v2(s3, filled.name)
    expected = sorted([*KEYS, "empty/"], key=lambda k: k.encode())
    assert keys == expected  # "a-b/x" < "a.txt" < "a/b.txt" < "a0": bytes, not tree order
    assert prefixes == []
    page = s3.list_objects_v2(Bucket=filled.name, Prefix="a/")
    assert [c["Key"] for c in page["Contents"]] == ["a/b.txt", "a/c/d.txt"]
    assert page["Contents"][0]["Size"] == len("a/b.txt")
    assert page["KeyCount"] == 2 and page["IsTruncated"] is False


def test_pagination_with_small_pages(s3, filled: Volume) -> None:  # type: ignore[no-untyped-def]
    everything, _, _ = all_v2(s3, filled.name)
    for size in (1, 2, 3):
        keys, _, pages = all_v2(s3, filled.name, PaginationConfig={"PageSize": size})
        assert keys == everything
        assert pages == -(-len(everything) // size)
    after = s3.list_objects_v2(Bucket=filled.name, StartAfter="a/b.txt", MaxKeys=2)
    assert [c["Key"] for c in after["Contents"]] == ["a/c/d.txt", "a0"]
    assert after["IsTruncated"] is True


def test_delimiter(s3, filled: Volume) -> None:  # type: ignore[no-untyped-def]
    keys, prefixes, _ = all_v2(s3, filled.name, Delimiter="/")
    assert keys == ["a.txt", "a0", "z"]
    assert prefixes == ["a-b/", "a/", "b/", "empty/", "sp ace+plus/"]
    for size in (1, 2):  # common prefixes count toward a page and are not repeated
        k, p, _ = all_v2(s3, filled.name, Delimiter="/", PaginationConfig={"PageSize": size})
        assert (k, p) == (keys, prefixes)
    keys, prefixes, _ = all_v2(s3, filled.name, Delimiter="/", Prefix="b/")
    assert (keys, prefixes) == (["b/1", "b/2"], ["b/3/"])
    keys, prefixes, _ = all_v2(s3, filled.name, Delimiter="/", Prefix="a")
    assert (keys, prefixes) == (["a.txt", "a0"], ["a-b/", "a/"])
    keys, prefixes, _ = all_v2(s3, filled.name, Delimiter="/", Prefix="empty/")
    assert (keys, prefixes) == (["empty/"], [])  # an empty directory: its marker
    keys, prefixes, _ = all_v2(s3, filled.name, Delimiter=".")  # any delimiter
    assert prefixes == ["a.", "a/b.", "a/c/d.", "sp ace+plus/é."]
    assert keys == ["a-b/x", "a0", "b/1", "b/2", "b/3/4", "empty/", "z"]


def test_url_encoding_and_v1(s3, filled: Volume) -> None:  # type: ignore[no-untyped-def]
    page = s3.list_objects_v2(Bucket=filled.name, Prefix="sp", EncodingType="url")
    # Asked for explicitly, boto3 leaves the encoding to the caller (it asks by itself, and
    # decodes, in every other call here).
    assert [c["Key"] for c in page["Contents"]] == ["sp%20ace%2Bplus/%C3%A9.bin"]
    keys: list[str] = []
    prefixes: list[str] = []
    for page in s3.get_paginator("list_objects").paginate(
        Bucket=filled.name, Delimiter="/", PaginationConfig={"PageSize": 2}
    ):
        keys += [c["Key"] for c in page.get("Contents", [])]
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    assert keys == ["a.txt", "a0", "z"]
    assert prefixes == ["a-b/", "a/", "b/", "empty/", "sp ace+plus/"]
    v1: list[str] = []
    for page in s3.get_paginator("list_objects").paginate(
        Bucket=filled.name, PaginationConfig={"PageSize": 3}
    ):
        v1 += [c["Key"] for c in page.get("Contents", [])]
    assert v1 == all_v2(s3, filled.name)[0]


def test_buckets_and_bucket_calls(s3, filled: Volume) -> None:  # type: ignore[no-untyped-def]
    assert filled.name in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.head_bucket(Bucket=filled.name)
    assert s3.get_bucket_location(Bucket=filled.name)["LocationConstraint"] is None
    assert "Status" not in s3.get_bucket_versioning(Bucket=filled.name)
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket="no-such-volume")
    assert e.value.response["Error"]["Code"] == "NoSuchBucket"
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="new-bucket")
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    assert "cloudfs volume create" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=filled.name)
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    with pytest.raises(ClientError) as e:
        s3.get_bucket_acl(Bucket=filled.name)
    assert e.value.response["Error"]["Code"] == "NotImplemented"
