"""One page of a directory's listing (ListObjectsV2 with a delimiter), and
``DirectList``: that request without botocore's response pipeline.

A cold read's first lookup in a directory lists it, and the tree lists it again
as its listing expires. Through botocore each listed object cost ~61 us of CPU,
most of it holding the GIL, on this project's 2-core machine: the XML body
parsed twice (once more by the handler that looks for an error inside a 200),
every timestamp through dateutil, a dozen event hooks. That was 12-15% of the
mount's GIL time per cold small file (benchmarks/RESULTS-cold-cost.md); here ~14
us (benchmarks/s3_call_cost.py). ``DirectList`` signs the same request as
botocore would (SigV4 with the client's credentials and region, through the
client's own HTTP session, as ``DirectGet`` does), parses the body once with
ElementTree's C parser and the timestamps with ``datetime.fromisoformat``.

Its contract is ``DirectGet``'s: it only answers a 200 whose body parses; for
anything else (an error status, a body cut short, a transport failure) it
returns ``None`` and the store asks botocore, which owns retries, back-off and
the errors' translation. An answer that says the request is wrong for this
endpoint (a redirect, 400, 403, 405) turns it off for the store's life.

Keys come back URL-encoded where the server says so (``EncodingType`` url,
asked for as botocore asks for it, since XML 1.0 cannot carry every byte a key
may hold) and are decoded as botocore decodes them.
"""

from __future__ import annotations

import calendar
import logging
from datetime import datetime
from typing import Any, NamedTuple
from urllib.parse import unquote_plus, urlsplit
from xml.etree import ElementTree

from botocore.awsrequest import AWSRequest
from botocore.utils import parse_timestamp

from cloudfs.types import ListPage, ObjectInfo
from cloudfs.ufs.interface import child_key
from cloudfs.ufs.s3_direct import DirectGet, SignedPath

log = logging.getLogger(__name__)


class RawPage(NamedTuple):
    """One ListObjectsV2 answer, keys in full (the store's prefix included)."""

    objects: list[tuple[str, int, int, str]]  # (key, size, mtime ns, ETag without quotes)
    prefixes: list[str]  # common prefixes, each ending with the delimiter
    next_token: str | None


def mtime_ns(value: datetime) -> int:
    return calendar.timegm(value.utctimetuple()) * 1_000_000_000 + value.microsecond * 1000


def bare_etag(raw: str) -> str:
    return raw.strip('"')


def from_botocore(resp: Any) -> RawPage:
    """The page botocore's ``list_objects_v2`` answered."""
    objects = [
        (
            obj["Key"],
            int(obj["Size"]),
            mtime_ns(obj["LastModified"]),
            bare_etag(obj.get("ETag", "")),
        )
        for obj in resp.get("Contents", [])
    ]
    prefixes = [common.get("Prefix", "") for common in resp.get("CommonPrefixes", [])]
    token = resp.get("NextContinuationToken") if resp.get("IsTruncated") else None
    return RawPage(objects, prefixes, token or None)


def to_list_page(prefix: str, listed: str, raw: RawPage) -> ListPage:
    """The entries of directory ``prefix`` (listed as ``listed``, its full key and "/")."""
    objects: list[ObjectInfo] = []
    prefixes: list[str] = []
    seen: set[str] = set()

    def add_prefix(name: str) -> None:
        name = name.rstrip("/")
        if name and "/" not in name and name not in seen:
            seen.add(name)
            prefixes.append(child_key(prefix, name))

    for key, size, mtime, etag in raw.objects:
        name = key[len(listed) :]
        if not name:
            continue  # the marker of the listed directory itself
        if name.endswith("/"):
            add_prefix(name)  # a "sub/" marker (only without a delimiter match)
            continue
        objects.append(
            ObjectInfo(key=child_key(prefix, name), size=size, mtime_ns=mtime, etag=etag)
        )
    for common in raw.prefixes:
        add_prefix(common[len(listed) :])
    return ListPage(objects=objects, prefixes=prefixes, next_token=raw.next_token)


def _timestamp_ns(text: str) -> int:
    try:
        return mtime_ns(datetime.fromisoformat(text))
    except ValueError:  # not ISO 8601 as S3 writes it: botocore's parser knows more forms
        return mtime_ns(parse_timestamp(text))


def parse_page(body: bytes) -> RawPage:
    """A ListObjectsV2 body (raises ``ElementTree.ParseError`` if it is not one whole)."""
    root = ElementTree.fromstring(body)
    if _local(root.tag) != "ListBucketResult":
        raise ElementTree.ParseError(f"not a listing: <{_local(root.tag)}>")
    objects: list[tuple[str, int, int, str]] = []
    prefixes: list[str] = []
    top: dict[str, str] = {}
    for child in root:
        tag = _local(child.tag)
        if tag == "Contents":
            f = {_local(field.tag): field.text or "" for field in child}
            objects.append(
                (
                    f["Key"],
                    int(f["Size"]),
                    _timestamp_ns(f["LastModified"]),
                    bare_etag(f.get("ETag", "")),
                )
            )
        elif tag == "CommonPrefixes":
            prefixes.extend(field.text or "" for field in child if _local(field.tag) == "Prefix")
        else:
            top[tag] = child.text or ""
    if top.get("EncodingType") == "url":
        objects = [(unquote_plus(k), size, mtime, etag) for k, size, mtime, etag in objects]
        prefixes = [unquote_plus(p) for p in prefixes]
    token = top.get("NextContinuationToken") if top.get("IsTruncated") == "true" else None
    return RawPage(objects, prefixes, token or None)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


class DirectList(SignedPath):
    """Signed ListObjectsV2 requests of one bucket, through the client's HTTP session."""

    what = "listing"

    def __init__(self, get: DirectGet) -> None:
        super().__init__(get.http, get.credentials, get.region)
        base = get.base_url  # path-style: the bucket's path, which lists without its "/"
        self._url = base if urlsplit(base).path == "/" else base.rstrip("/")

    def page(self, full_prefix: str, token: str | None, limit: int) -> RawPage | None:
        """The page of ``full_prefix`` ("/" as delimiter) after ``token``, or None: ask
        botocore instead."""
        if not self.enabled:
            return None
        return self._counted(self._send(full_prefix, token, limit))

    def _send(self, full_prefix: str, token: str | None, limit: int) -> RawPage | None:
        params = {
            "list-type": "2",
            "prefix": full_prefix,
            "delimiter": "/",
            "max-keys": str(limit),
            "encoding-type": "url",
        }
        if token:
            params["continuation-token"] = token
        request = AWSRequest(method="GET", url=self._url, params=params)
        try:
            response = self._signed_send(request)
            status = response.status_code
            if status == 200:
                return parse_page(response.content)
        except Exception as err:  # a transport failure or a body cut short: botocore's turn
            log.debug("direct listing of %r failed (%s): falling back", full_prefix, err)
            return None
        self._refused(status)
        return None
