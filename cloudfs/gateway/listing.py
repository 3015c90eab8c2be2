"""Listings: ListObjectsV2, ListObjects (V1), ListBuckets and the bucket's own calls.

Keys come from ``walk.py`` in S3's byte order, lazily. A "/" delimiter lists
one directory of the tree; no delimiter walks the tree below the prefix;
any other delimiter groups a recursive walk's keys, skipping each group's
remaining keys once it is listed. The continuation token is the last key
listed (a common prefix followed by 0xFF, past every key it holds), base64:
opaque to clients, and it survives changes between pages as S3's does.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import quote
from xml.sax.saxutils import escape

from cloudfs.client.volume import VolumeHandle
from cloudfs.gateway.context import Gateway
from cloudfs.gateway.errors import S3Error
from cloudfs.gateway.exchange import Request, Response, xml_response
from cloudfs.gateway.objects import iso_date, quoted_etag
from cloudfs.gateway.walk import Item, walk
from cloudfs.gateway.xmlio import Tree, render

MAX_KEYS = 1000
PAST = b"\xff"  # no UTF-8 byte: key + PAST sorts after every key starting with key
OWNER: Tree = [("ID", "cloudfs"), ("DisplayName", "cloudfs")]


@dataclass
class Page:
    contents: list[Item] = field(default_factory=list)
    prefixes: list[bytes] = field(default_factory=list)
    truncated: bool = False
    bound: bytes = b""  # where the next page starts (exclusive)
    last: bytes = b""  # the last key or prefix listed (V1's NextMarker)


def list_page(
    handle: VolumeHandle, prefix: bytes, delimiter: bytes, after: bytes, max_keys: int
) -> Page:
    """Up to ``max_keys`` keys and common prefixes after ``after``, in S3's order."""
    page = Page()
    if delimiter and after.startswith(prefix) and after.endswith(delimiter):
        after += PAST  # a marker that is a common prefix: past its keys
    for key, item in _grouped(handle, prefix, delimiter, after):
        if len(page.contents) + len(page.prefixes) == max_keys:
            page.truncated = True
            break
        if item is None:
            page.prefixes.append(key)
            page.bound = key + PAST
        else:
            page.contents.append(item)
            page.bound = key
        page.last = key
    return page


def _grouped(
    handle: VolumeHandle, prefix: bytes, delimiter: bytes, after: bytes
) -> Iterator[tuple[bytes, Item | None]]:
    """(key, item) of the keys, (prefix, None) of the common prefixes, in order."""
    if delimiter == b"/":
        for item in walk(handle, prefix, after, recursive=False):
            yield (item.key, None) if item.is_prefix else (item.key, item)
        return
    while True:
        for item in walk(handle, prefix, after, recursive=True):
            at = item.key.find(delimiter, len(prefix)) if delimiter else -1
            if at < 0:
                yield item.key, item
                continue
            common = item.key[: at + len(delimiter)]
            yield common, None
            after = common + PAST  # the group's other keys are not read one by one
            break
        else:
            return


def _params(req: Request) -> tuple[bytes, bytes, int, bool]:
    prefix = req.query.get("prefix", "").encode()
    delimiter = req.query.get("delimiter", "").encode()
    text = req.query.get("max-keys", str(MAX_KEYS))
    if not (text.isascii() and text.isdigit()):
        raise S3Error("InvalidArgument", 400, "max-keys must be a non-negative integer")
    encoding = req.query.get("encoding-type")
    if encoding not in (None, "url"):
        raise S3Error("InvalidArgument", 400, "Invalid Encoding Method specified in Request")
    return prefix, delimiter, min(int(text), MAX_KEYS), encoding == "url"


def _text(value: bytes, url: bool) -> str:
    decoded = value.decode("utf-8")
    return quote(decoded, safe="/") if url else decoded


def _contents(page: Page, url: bool, owner: bool) -> Tree:
    rows: Tree = []
    for item in page.contents:
        row: Tree = [
            ("Key", _text(item.key, url)),
            ("LastModified", iso_date(item.attr.mtime_ns)),
            ("ETag", quoted_etag(item.attr)),
            ("Size", item.attr.size if item.attr.is_reg else 0),
            ("StorageClass", "STANDARD"),
        ]
        if owner:
            row.append(("Owner", OWNER))
        rows.append(("Contents", row))
    for common in page.prefixes:
        rows.append(("CommonPrefixes", [("Prefix", _text(common, url))]))
    return rows


def list_objects_v2(gw: Gateway, req: Request) -> Response:
    handle = gw.buckets.handle(req.bucket)
    prefix, delimiter, max_keys, url = _params(req)
    token = req.query.get("continuation-token")
    start_after = req.query.get("start-after", "").encode()
    after = start_after
    if token is not None:
        try:
            after = base64.b64decode(token.encode(), altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            raise S3Error(
                "InvalidArgument", 400, "The continuation token provided is incorrect"
            ) from None
    page = list_page(handle, prefix, delimiter, after, max_keys)
    fields: Tree = [
        ("Name", req.bucket),
        ("Prefix", _text(prefix, url)),
        ("Delimiter", _text(delimiter, url) if delimiter else None),
        ("MaxKeys", max_keys),
        ("EncodingType", "url" if url else None),
        ("KeyCount", len(page.contents) + len(page.prefixes)),
        ("IsTruncated", page.truncated),
        ("ContinuationToken", token),
        ("StartAfter", _text(start_after, url) if start_after else None),
    ]
    if page.truncated:
        next_token = base64.urlsafe_b64encode(page.bound).decode()
        fields.append(("NextContinuationToken", next_token))
    owner = req.query.get("fetch-owner", "").lower() == "true"
    return xml_response(render("ListBucketResult", fields + _contents(page, url, owner)))


def list_objects_v1(gw: Gateway, req: Request) -> Response:
    handle = gw.buckets.handle(req.bucket)
    prefix, delimiter, max_keys, url = _params(req)
    marker = req.query.get("marker", "").encode()
    page = list_page(handle, prefix, delimiter, marker, max_keys)
    fields: Tree = [
        ("Name", req.bucket),
        ("Prefix", _text(prefix, url)),
        ("Marker", _text(marker, url)),
        ("MaxKeys", max_keys),
        ("Delimiter", _text(delimiter, url) if delimiter else None),
        ("EncodingType", "url" if url else None),
        ("IsTruncated", page.truncated),
        ("NextMarker", _text(page.last, url) if page.truncated and delimiter else None),
    ]
    return xml_response(render("ListBucketResult", fields + _contents(page, url, True)))


def list_buckets(gw: Gateway, req: Request) -> Response:
    buckets: Tree = [
        ("Bucket", [("Name", name), ("CreationDate", "2000-01-01T00:00:00.000Z")])
        for name in gw.buckets.names()
    ]
    return xml_response(render("ListAllMyBucketsResult", [("Owner", OWNER), ("Buckets", buckets)]))


def head_bucket(gw: Gateway, req: Request) -> Response:
    gw.buckets.handle(req.bucket)
    return Response(200, {"x-amz-bucket-region": gw.region})


def bucket_location(gw: Gateway, req: Request) -> Response:
    gw.buckets.handle(req.bucket)
    region = "" if gw.region == "us-east-1" else gw.region  # S3 says nothing for us-east-1
    document = render("LocationConstraint", [])
    return xml_response(
        document.replace(b" />", b">" + escape(region).encode() + b"</LocationConstraint>")
    )


def bucket_versioning(gw: Gateway, req: Request) -> Response:
    gw.buckets.handle(req.bucket)
    return xml_response(render("VersioningConfiguration", []))


def refuse_bucket_change(gw: Gateway, req: Request) -> Response:
    raise S3Error(
        "AccessDenied",
        403,
        "buckets are CloudFS volumes: create and delete them with `cloudfs volume create/delete`",
        resource=req.resource,
    )
