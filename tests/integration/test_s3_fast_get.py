"""Ranged GETs through the fast paths, against moto over HTTP (and a proxy that counts
requests): NativeGet (obstore, the default) and DirectGet (where the native path
cannot be had), each test run through both.

The contract tests (tests/contract/test_object_store.py) already read every
byte of an S3 store through the default one; these pin what is particular to a
fast path: it answers the happy path itself in one request, signs as S3 expects
(moto verifying signatures), and hands everything else to botocore, turning
itself off where the endpoint says the request is wrong.
"""

from __future__ import annotations

import http.server
import multiprocessing
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.credentials import Credentials

from cloudfs.config import S3Config
from cloudfs.errors import NotFound, ObjectChanged, RemoteIOError, UfsAccessDenied
from cloudfs.ufs import s3 as s3_module
from cloudfs.ufs.s3 import S3ObjectStore
from cloudfs.ufs.s3_direct import Body, DirectGet
from cloudfs.ufs.s3_native import NativeGet
from testkit.faults_proxy import FaultsProxy, running_proxy
from testkit.servers import S3Server

DATA = os.urandom(300_000)


@pytest.fixture(params=["native", "direct"])
def fast_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> type:
    """Which fast path the stores built in the test use."""
    if request.param == "direct":  # as where obstore cannot serve the endpoint
        monkeypatch.setattr(s3_module.NativeGet, "for_client", lambda *args: None)
        return DirectGet
    return NativeGet


@pytest.fixture
def proxied(
    aws_env: None, s3_server: S3Server, s3_bucket: str, fast_path: type
) -> Iterator[tuple[S3ObjectStore, FaultsProxy]]:
    with running_proxy(s3_server.endpoint, seed=3) as proxy:
        config = S3Config(endpoint_url=proxy.endpoint, connect_timeout=2, read_timeout=2)
        store = S3ObjectStore(s3_bucket, "direct", config)
        assert isinstance(store.direct, fast_path)
        store.put_bytes("dir/a b+c~%d.bin", DATA)
        proxy.reset_counts()
        yield store, proxy


def test_ranges_are_one_request_each(proxied: tuple[S3ObjectStore, FaultsProxy]) -> None:
    store, proxy = proxied
    direct = store.direct
    assert direct is not None and direct.enabled
    ranges = [(0, 1), (0, len(DATA)), (1000, 65536), (len(DATA) - 10, 10), (len(DATA) - 10, 100)]
    for offset, length in ranges:
        assert store.get_range("dir/a b+c~%d.bin", offset, length) == DATA[offset : offset + length]
    assert proxy.count("GET") == len(ranges)
    assert (direct.served, direct.fell_back) == (len(ranges), 0)


@pytest.mark.parametrize("given_as", ["option", "environment"])
def test_the_endpoint_is_the_option_else_the_environment(
    aws_env: None,
    s3_server: S3Server,
    s3_bucket: str,
    fast_path: type,
    monkeypatch: pytest.MonkeyPatch,
    given_as: str,
) -> None:
    """--s3-endpoint over AWS_ENDPOINT_URL_S3, as botocore does (obstore, left alone, lets
    the environment win), and the environment's alone is followed too."""
    with running_proxy(s3_server.endpoint) as proxy:
        if given_as == "option":  # the environment names moto itself: it must lose
            monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint)
            config = S3Config(endpoint_url=proxy.endpoint)
        else:
            monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.endpoint)
            config = S3Config()
        store = S3ObjectStore(s3_bucket, "env", config)
        store.put_bytes("a", DATA)
        proxy.reset_counts()
        assert store.get_range("a", 5, 10) == DATA[5:15]
        assert proxy.count("GET") == 1
        assert isinstance(store.direct, fast_path) and store.direct.served == 1


def test_missing_key_and_range_past_end_fall_back(
    proxied: tuple[S3ObjectStore, FaultsProxy],
) -> None:
    store, _ = proxied
    direct = store.direct
    assert direct is not None
    with pytest.raises(NotFound):
        store.get_range("dir/missing", 0, 10)
    assert store.get_range("dir/a b+c~%d.bin", len(DATA), 10) == b""
    assert direct.fell_back == 2 and direct.enabled  # neither says the request was wrong
    assert store.get_range("dir/a b+c~%d.bin", 5, 5) == DATA[5:10]
    assert direct.served == 1


def test_a_version_is_asked_for_with_if_match(proxied: tuple[S3ObjectStore, FaultsProxy]) -> None:
    store, proxy = proxied
    direct = store.direct
    assert direct is not None
    etag = store.head("dir/a b+c~%d.bin").etag
    proxy.reset_counts()
    assert store.get_range("dir/a b+c~%d.bin", 3, 7, etag) == DATA[3:10]
    assert proxy.count("GET") == 1 and direct.served == 1
    with pytest.raises(ObjectChanged):  # 412: botocore is asked again and says so
        store.get_range("dir/a b+c~%d.bin", 3, 7, "0" * 32)
    assert direct.fell_back == 1 and direct.enabled


def _read_in_child(store: S3ObjectStore, answers: Any) -> None:
    answers.put((type(store.direct).__name__, store.get_range("dir/a b+c~%d.bin", 0, 10)))


def test_a_forked_child_reads_without_the_parents_runtime(
    proxied: tuple[S3ObjectStore, FaultsProxy],
) -> None:
    """obstore's runtime does not survive fork(): a child (a DataLoader worker) that
    used it would hang; it reads through DirectGet instead."""
    store, _ = proxied
    assert store.get_range("dir/a b+c~%d.bin", 0, 10) == DATA[:10]  # the runtime is up
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    child = context.Process(target=_read_in_child, args=(store, answers))
    child.start()
    try:
        assert answers.get(timeout=30) == ("DirectGet", DATA[:10])
    finally:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()


def test_server_errors_go_to_botocore_retries(proxied: tuple[S3ObjectStore, FaultsProxy]) -> None:
    store, proxy = proxied
    direct = store.direct
    assert direct is not None
    proxy.fault = "error"  # 503 SlowDown
    proxy.fail_ratio = 1.0
    with pytest.raises(RemoteIOError):
        store.get_range("dir/a b+c~%d.bin", 0, 10)
    assert proxy.count("GET") == 1 + 3  # the direct try, then botocore's max_attempts
    proxy.fault = "cut"  # the connection closes without an answer
    with pytest.raises(RemoteIOError):
        store.get_range("dir/a b+c~%d.bin", 0, 10)
    proxy.fail_ratio = 0.0
    assert direct.enabled
    assert store.get_range("dir/a b+c~%d.bin", 0, 10) == DATA[:10]
    assert direct.served == 1


def test_signature_is_accepted_by_a_verifying_server(
    aws_env: None,
    signing_server: tuple[S3Server, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    fast_path: type,
) -> None:
    server, keys = signing_server
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    store = S3ObjectStore("signed-bucket", "", S3Config(endpoint_url=server.endpoint))
    # A space and a tilde test the path's quoting; moto's own check of a
    # signature refuses "+" and non-ASCII keys even from botocore.
    store.put_bytes("deep/a b~1", DATA)
    assert store.get_range("deep/a b~1", 7, 1000) == DATA[7:1007]
    assert isinstance(store.direct, fast_path) and store.direct.served == 1


def test_a_refused_signature_turns_the_direct_path_off(
    aws_env: None,
    signing_server: tuple[S3Server, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    fast_path: type,
) -> None:
    server, keys = signing_server
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", keys["AWS_ACCESS_KEY_ID"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    store = S3ObjectStore("signed-bucket", "", S3Config(endpoint_url=server.endpoint))
    direct = store.direct
    assert isinstance(direct, fast_path)
    with pytest.raises(UfsAccessDenied):
        store.get_range("deep/k", 0, 10)
    assert not direct.enabled and direct.fell_back == 1
    with pytest.raises(UfsAccessDenied):
        store.get_range("deep/k", 0, 10)
    assert direct.fell_back == 1  # not tried again


# -- the answer's shape, against a stand-in for botocore's HTTP session ------


class _Answer:
    def __init__(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.status_code = status
        self.content = body
        self.headers = headers


class _Session:
    def __init__(self, answer: _Answer) -> None:
        self.answer = answer
        self.urls: list[str] = []

    def send(self, request: Any) -> _Answer:
        self.urls.append(request.url)
        assert str(request.headers["Authorization"]).startswith("AWS4-HMAC-SHA256 ")
        return self.answer


def _direct(answer: _Answer) -> tuple[DirectGet, _Session]:
    session = _Session(answer)
    return DirectGet(session, "http://s3.test/bkt/", Credentials("a", "b"), "us-east-1"), session


def test_whole_object_answers_are_marked_so_the_store_slices_them() -> None:
    direct, session = _direct(_Answer(200, b"0123456789", {"content-length": "10"}))
    assert direct.get("x/y z", 3, 4) == Body(b"0123456789", partial=False)
    assert session.urls == ["http://s3.test/bkt/x/y%20z"]


def test_short_or_unlabelled_bodies_fall_back() -> None:
    direct, _ = _direct(
        _Answer(206, b"01", {"content-length": "4", "content-range": "bytes 0-3/9"})
    )
    assert direct.get("k", 0, 4) is None
    direct, _ = _direct(_Answer(206, b"0123", {"content-length": "4"}))
    assert direct.get("k", 0, 4) is None
    assert direct.enabled


@pytest.mark.parametrize("status", [301, 307, 400, 403, 405])
def test_statuses_that_say_the_request_is_wrong_turn_it_off(status: int) -> None:
    direct, _ = _direct(_Answer(status, b"", {}))
    assert direct.get("k", 0, 4) is None
    assert not direct.enabled
    assert direct.get("k", 0, 4) is None


# -- NativeGet against a server that answers another range than asked ------------


class _WrongRanges(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the whole object (``full``), the object's first 100
    bytes as a 206 (``other``), or a 206 whose body is cut short (``cut``)."""

    mode = "full"
    body = bytes(range(256)) * 16

    def do_GET(self) -> None:
        whole = len(self.body)
        if self.mode == "full":
            status, part, extra = 200, self.body, {}
        elif self.mode == "other":
            status, part, extra = 206, self.body[:100], {"Content-Range": f"bytes 0-99/{whole}"}
        else:
            status, part, extra = 206, b"x" * 40, {"Content-Range": f"bytes 1000-1099/{whole}"}
        self.send_response(status)
        self.send_header("Content-Length", "100" if self.mode == "cut" else str(len(part)))
        self.send_header("ETag", '"e"')
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(part)
        if self.mode == "cut":
            self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("mode", ["full", "other", "cut"])
def test_native_get_never_answers_bytes_of_another_range(mode: str) -> None:
    """A server that ignored Range, answered another range, or cut the body short:
    NativeGet hands the request to botocore (None) instead of answering those bytes,
    so they can never reach a block cache as the range asked for."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _WrongRanges)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _WrongRanges.mode = mode
    try:
        config = S3Config(
            endpoint_url=f"http://127.0.0.1:{server.server_port}", connect_timeout=2,
            read_timeout=2,
        )  # fmt: skip
        native = NativeGet.for_client("bkt", config, "us-east-1", Credentials("a", "b"))
        assert native is not None
        assert native.get("k", 1000, 100) is None
        assert native.fell_back == 1 and native.served == 0 and native.enabled
    finally:
        server.shutdown()
        server.server_close()
