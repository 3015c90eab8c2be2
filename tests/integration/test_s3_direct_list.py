"""Listings through DirectList (ListObjectsV2 without botocore's response pipeline),
against moto over HTTP and a proxy that counts requests and fails them on purpose.

The contract suite already lists S3 stores through it; these pin what is particular
to it: every page equal to botocore's for the same request, names XML cannot carry,
one request per page, and botocore taking over whatever it could not answer. The
gateway checks its signatures (tests/gateway/test_s3_store_signing.py).
"""

from __future__ import annotations

from xml.etree.ElementTree import ParseError

import pytest

from cloudfs.config import S3Config
from cloudfs.types import ListPage
from cloudfs.ufs.s3 import S3ObjectStore
from cloudfs.ufs.s3_list import DirectList, parse_page
from testkit.faults_proxy import FaultsProxy

NAMES = ["a b", "plus+sign", "pct%2Fslash", "é-ü", "tilde~", "ctl\x01char", "amp&lt;"]


@pytest.fixture
def proxied(
    aws_env: None, seeded_proxy: FaultsProxy, s3_bucket: str
) -> tuple[S3ObjectStore, FaultsProxy]:
    proxy = seeded_proxy
    config = S3Config(endpoint_url=proxy.endpoint, connect_timeout=2, read_timeout=2)
    store = S3ObjectStore(s3_bucket, "list", config)
    for name in NAMES:
        store.put_bytes(f"dir/{name}", name.encode())
    store.make_dir("dir/sub dir")
    store.put_bytes("dir/deeper/x", b"x")
    proxy.reset_counts()
    return store, proxy


def _lister(store: S3ObjectStore) -> DirectList:
    lister = store._lister
    assert lister is not None
    return lister


def _all_pages(store: S3ObjectStore, prefix: str, limit: int) -> list[ListPage]:
    pages = [store.list_dir(prefix, None, limit)]
    while pages[-1].next_token:
        pages.append(store.list_dir(prefix, pages[-1].next_token, limit))
    return pages


def test_pages_equal_botocores_and_are_one_request_each(
    proxied: tuple[S3ObjectStore, FaultsProxy],
) -> None:
    store, proxy = proxied
    direct = _all_pages(store, "dir", 3)
    assert len(direct) >= 3 and proxy.count("GET") == _lister(store).served == len(direct)
    store._lister = None  # the same requests through botocore
    assert _all_pages(store, "dir", 3) == direct
    listed = [o.key for page in direct for o in page.objects]
    assert sorted(listed) == sorted(f"dir/{name}" for name in NAMES)
    assert sorted(p for page in direct for p in page.prefixes) == ["dir/deeper", "dir/sub dir"]
    sizes = {o.key: o.size for page in direct for o in page.objects}
    assert sizes["dir/é-ü"] == len("é-ü".encode())
    head = store.head("dir/a b")
    (listed_a,) = [o for page in direct for o in page.objects if o.key == "dir/a b"]
    assert (listed_a.etag, listed_a.mtime_ns // 10**9) == (head.etag, head.mtime_ns // 10**9)


def test_a_failed_listing_is_asked_again_through_botocore(
    proxied: tuple[S3ObjectStore, FaultsProxy],
) -> None:
    store, proxy = proxied
    proxy.fault, proxy.fault_methods, proxy.fail_ratio = "cut", frozenset({"GET"}), 0.5
    page = store.list_dir("dir")
    assert proxy.injected == 1 and proxy.count("GET") == 2
    lister = _lister(store)
    assert (lister.served, lister.fell_back, lister.enabled) == (0, 1, True)
    assert len(page.objects) == len(NAMES)


# -- the body's parsing ---------------------------------------------------------------

_BODY = (
    "<ListBucketResult><IsTruncated>true</IsTruncated>"
    "<NextContinuationToken>t1</NextContinuationToken>"
    "<Contents><Key>d/a</Key><LastModified>{when}</LastModified>"
    "<ETag>&quot;e1&quot;</ETag><Size>5</Size></Contents>"
    "<CommonPrefixes><Prefix>d/s/</Prefix></CommonPrefixes></ListBucketResult>"
)


@pytest.mark.parametrize("when", ["2026-12-07T21:18:43.250Z", "Mon, 07 Dec 2026 21:18:43 GMT"])
def test_a_body_without_namespace_and_either_timestamp_form(when: str) -> None:
    page = parse_page(_BODY.format(when=when).encode())
    seconds = 1796678323
    millis = 250 if "." in when else 0
    assert page.objects == [("d/a", 5, seconds * 10**9 + millis * 10**6, "e1")]
    assert (page.prefixes, page.next_token) == (["d/s/"], "t1")


def test_a_body_cut_short_or_an_error_is_not_a_page() -> None:
    body = _BODY.format(when="2026-12-07T21:18:43Z").encode()
    with pytest.raises(ParseError):
        parse_page(body[:-20])
    with pytest.raises(ParseError):
        parse_page(b"<Error><Code>InternalError</Code></Error>")
