"""Uploads of small files through NativePut (obstore), against moto over HTTP and a
proxy that counts requests and fails them on purpose.

The contract suite and the write-back tests already put every small file through
this path; these pin what is particular to it: one request per file, the ETag the
object reads back with, and botocore taking over whatever the native try could not do
(a failed request, a file too large to send in one body). The gateway checks its
signatures (tests/gateway/test_s3_store_signing.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudfs.config import S3Config
from cloudfs.errors import InvalidArgument
from cloudfs.ufs import s3 as s3_module
from cloudfs.ufs.s3 import S3ObjectStore
from cloudfs.ufs.s3_native import NativePut
from testkit.faults_proxy import FaultsProxy

DATA = os.urandom(300_000)


@pytest.fixture
def body(tmp_path: Path) -> str:
    path = tmp_path / "body"
    path.write_bytes(DATA)
    return str(path)


@pytest.fixture
def proxied(
    aws_env: None, seeded_proxy: FaultsProxy, s3_bucket: str
) -> tuple[S3ObjectStore, FaultsProxy]:
    config = S3Config(endpoint_url=seeded_proxy.endpoint, connect_timeout=2, read_timeout=2)
    return S3ObjectStore(s3_bucket, "put", config), seeded_proxy


def _native(store: S3ObjectStore) -> NativePut:
    native = store._native_put
    assert native is not None
    return native


def test_a_small_file_is_one_native_put(
    proxied: tuple[S3ObjectStore, FaultsProxy], body: str
) -> None:
    store, proxy = proxied
    info = store.put_file("dir/a b+c~%d.bin", body)
    assert proxy.count("PUT") == 1 and proxy.count() == 1  # no HEAD after it
    assert (_native(store).served, _native(store).fell_back) == (1, 0)
    assert (info.size, info.etag) == (len(DATA), store.head("dir/a b+c~%d.bin").etag)
    assert store.get_range("dir/a b+c~%d.bin", 0, len(DATA), info.etag) == DATA


def test_a_failed_native_put_is_put_again_through_botocore(
    proxied: tuple[S3ObjectStore, FaultsProxy], body: str
) -> None:
    store, proxy = proxied
    proxy.fault, proxy.fault_methods, proxy.fail_ratio = "cut", frozenset({"PUT"}), 0.5
    info = store.put_file("k", body)
    assert proxy.injected == 1 and proxy.count("PUT") == 2
    native = _native(store)
    assert (native.served, native.fell_back, native.enabled) == (0, 1, True)
    proxy.fail_ratio = 0.0
    assert store.get_range("k", 0, len(DATA), info.etag) == DATA


def test_files_above_put_max_go_through_botocore(
    proxied: tuple[S3ObjectStore, FaultsProxy], body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, proxy = proxied
    monkeypatch.setattr(s3_module, "PUT_MAX", len(DATA) - 1)
    info = store.put_file("big", body)
    assert proxy.count("PUT") == 1 and _native(store).served == 0
    assert info.etag == store.head("big").etag


def test_a_missing_source_is_a_clear_error(
    proxied: tuple[S3ObjectStore, FaultsProxy], tmp_path: Path
) -> None:
    store, proxy = proxied
    with pytest.raises(InvalidArgument, match="cannot read upload source"):
        store.put_file("k", str(tmp_path / "gone"))
    assert proxy.count() == 0
