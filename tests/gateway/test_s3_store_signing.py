"""CloudFS's own S3 store against the gateway, which checks every SigV4 signature:
the requests made outside botocore (DirectList's listings, obstore's GETs and PUTs)
are signed as S3 expects, and a refused signature turns each of them off.

(moto's signature check refuses a "/" in a query string even from botocore, so a
listing with a delimiter cannot be checked there.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudfs.config import S3Config
from cloudfs.errors import UfsAccessDenied
from cloudfs.ufs.s3 import S3ObjectStore
from tests.gateway.conftest import ACCESS_KEY, SECRET_KEY, Gateway, Volume


def _store(
    gateway: Gateway, bucket: str, secret: str, monkeypatch: pytest.MonkeyPatch
) -> S3ObjectStore:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    return S3ObjectStore(bucket, "", S3Config(endpoint_url=gateway.endpoint, region="us-east-1"))


def test_listings_gets_and_puts_outside_botocore_are_signed_as_s3_expects(
    gateway: Gateway, volume: Volume, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store = _store(gateway, volume.name, SECRET_KEY, monkeypatch)
    body = tmp_path / "body"
    body.write_bytes(b"0123456789" * 1000)
    info = store.put_file("dir/a b~1", str(body))
    store.put_file("dir/sub/c", str(body))
    page = store.list_dir("dir")
    assert [o.key for o in page.objects] == ["dir/a b~1"] and page.prefixes == ["dir/sub"]
    assert store.get_range("dir/a b~1", 5, 10, info.etag) == b"5678901234"
    lister, native_put, direct = store._lister, store._native_put, store.direct
    assert lister is not None and native_put is not None and direct is not None
    assert (lister.served, native_put.served, direct.served) == (1, 2, 1)


def test_a_refused_signature_turns_each_native_request_off(
    gateway: Gateway, volume: Volume, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store = _store(gateway, volume.name, "wrong-secret", monkeypatch)
    body = tmp_path / "body"
    body.write_bytes(b"x")
    with pytest.raises(UfsAccessDenied):
        store.list_dir("dir")
    with pytest.raises(UfsAccessDenied):
        store.put_file("dir/k", str(body))
    lister, native_put = store._lister, store._native_put
    assert lister is not None and native_put is not None
    assert not lister.enabled and not native_put.enabled
