"""One conformance suite for every ObjectStore: local directory, S3 (moto), S3 under a prefix,
the pyarrow store over a local directory, and HDFS when ``CLOUDFS_TEST_HDFS`` names a cluster.

Store-specific behaviour (S3 marker objects, endpoint failures, credentials) is
at the end, each test saying which store it is about.
"""

from __future__ import annotations

import errno
import os
import socket
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from cloudfs.config import MiB, S3Config
from cloudfs.errors import (
    IllegalName,
    InvalidArgument,
    IsADirectory,
    NameTooLong,
    NoSpace,
    NotADirectory,
    NotEmpty,
    NotFound,
    ObjectChanged,
    RemoteIOError,
    UfsAccessDenied,
)
from cloudfs.types import ListPage
from cloudfs.ufs.factory import parse_uri
from cloudfs.ufs.interface import ObjectStore
from cloudfs.ufs.local import LocalObjectStore
from cloudfs.ufs.s3 import S3ObjectStore
from cloudfs.ufs.s3_errors import translate
from testkit.servers import S3Server, free_port, running_s3_server

S3_PREFIX = "base/dir"
HDFS_ENV = "CLOUDFS_TEST_HDFS"
NO_HDFS = f"no HDFS cluster configured: set {HDFS_ENV}=hdfs://namenode:port/path"


def s3_config(endpoint: str | None, **overrides: Any) -> S3Config:
    values: dict[str, Any] = {
        "endpoint_url": endpoint,
        "multipart_threshold": 5 * MiB,
        "multipart_chunksize": 5 * MiB,
    }
    values.update(overrides)
    return S3Config(**values)


def arrow_local_store(root: Path) -> Any:
    """The pyarrow store over a local directory: pyarrow's own code paths, no cluster."""
    pafs = pytest.importorskip("pyarrow.fs")
    from cloudfs.ufs.arrow import ArrowObjectStore

    root.mkdir(exist_ok=True)
    fs = pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem())
    return ArrowObjectStore(fs, "", f"file://{root}")


@pytest.fixture
def hdfs_store() -> Iterator[Any]:
    """A fresh directory under ``$CLOUDFS_TEST_HDFS`` on a real cluster, removed afterwards."""
    uri = os.environ.get(HDFS_ENV)
    if not uri:
        pytest.skip(NO_HDFS)
    from cloudfs.ufs.hdfs import HdfsObjectStore

    parsed = parse_uri(uri)
    assert parsed.scheme == "hdfs", f"{HDFS_ENV} must be an hdfs:// URI, not {uri}"
    base = f"{parsed.prefix}/cloudfs-test-{uuid.uuid4().hex[:12]}".lstrip("/")
    store = HdfsObjectStore.connect(parsed.location, parsed.port, base)
    store.make_dir("")
    yield store
    store.filesystem.delete_dir("/" + base)


@pytest.fixture(params=["local", "s3", "s3-prefix", "arrow-local", "hdfs"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "local":
        root = tmp_path / "root"
        root.mkdir()
        return LocalObjectStore(str(root))
    if request.param == "arrow-local":
        return arrow_local_store(tmp_path / "root")  # type: ignore[no-any-return]
    if request.param == "hdfs":
        return request.getfixturevalue("hdfs_store")  # type: ignore[no-any-return]
    request.getfixturevalue("aws_env")
    server: S3Server = request.getfixturevalue("s3_server")
    bucket: str = request.getfixturevalue("s3_bucket")
    prefix = S3_PREFIX if request.param == "s3-prefix" else ""
    return S3ObjectStore(bucket, prefix, s3_config(server.endpoint))


@pytest.fixture(params=["s3", "s3-prefix"])
def s3_store(
    request: pytest.FixtureRequest, aws_env: None, s3_server: S3Server, s3_bucket: str
) -> tuple[S3ObjectStore, Any, str]:
    """(store, raw boto3 client, full-key prefix ending in "/" or "") for marker tests."""
    prefix = S3_PREFIX if request.param == "s3-prefix" else ""
    store = S3ObjectStore(s3_bucket, prefix, s3_config(s3_server.endpoint))
    client = s3_server.client()  # type: ignore[no-untyped-call]
    return store, client, f"{prefix}/" if prefix else ""


def all_entries(store: ObjectStore, prefix: str, limit: int = 1000) -> tuple[list[str], list[str]]:
    objects: list[str] = []
    prefixes: list[str] = []
    token: str | None = None
    while True:
        page = store.list_dir(prefix, token, limit)
        objects += [o.key for o in page.objects]
        prefixes += page.prefixes
        if page.next_token is None:
            return sorted(objects), sorted(prefixes)
        token = page.next_token


# -- objects -----------------------------------------------------------------


def test_put_bytes_then_head(store: ObjectStore) -> None:
    info = store.put_bytes("a.txt", b"hello")
    assert (info.key, info.size, info.is_dir) == ("a.txt", 5, False)
    assert info.etag and '"' not in info.etag
    assert abs(info.mtime_ns - time.time_ns()) < 120 * 10**9
    head = store.head("a.txt")
    assert (head.key, head.size, head.etag, head.mtime_ns) == (
        "a.txt",
        5,
        info.etag,
        info.mtime_ns,
    )


def test_overwrite_changes_etag(store: ObjectStore) -> None:
    first = store.put_bytes("k", b"one")
    second = store.put_bytes("k", b"two")
    assert first.etag != second.etag
    assert store.get_range("k", 0, 10) == b"two"


def test_head_missing_and_directory_are_not_found(store: ObjectStore) -> None:
    store.put_bytes("dir/file", b"x")
    with pytest.raises(NotFound):
        store.head("missing")
    with pytest.raises(NotFound):
        store.head("dir")


def test_get_range(store: ObjectStore) -> None:
    data = bytes(range(256)) * 4
    store.put_bytes("r.bin", data)
    assert store.get_range("r.bin", 0, len(data)) == data
    assert store.get_range("r.bin", 10, 20) == data[10:30]
    assert store.get_range("r.bin", 1000, 100) == data[1000:]  # short read at the end
    assert store.get_range("r.bin", len(data), 10) == b""
    assert store.get_range("r.bin", len(data) + 5, 10) == b""
    assert store.get_range("r.bin", 3, 0) == b""
    with pytest.raises(NotFound):
        store.get_range("nope", 0, 10)


def test_get_range_of_one_version(store: ObjectStore) -> None:
    old = os.urandom(1000)
    etag = store.put_bytes("v.bin", old).etag
    assert store.get_range("v.bin", 10, 20, etag) == old[10:30]
    assert store.get_range("v.bin", 0, 2000, etag) == old
    new = os.urandom(1000)  # the same size: only the version tells them apart
    store.put_bytes("v.bin", new)
    with pytest.raises(ObjectChanged) as caught:
        store.get_range("v.bin", 10, 20, etag)
    assert caught.value.errno == errno.ESTALE
    assert store.get_range("v.bin", 10, 20, store.head("v.bin").etag) == new[10:30]
    assert store.get_range("v.bin", 10, 20) == new[10:30]  # no etag: whatever is there
    with pytest.raises(NotFound):
        store.get_range("nope", 0, 10, etag)


def test_get_range_of_empty_object(store: ObjectStore) -> None:
    store.put_bytes("empty", b"")
    assert store.head("empty").size == 0
    assert store.get_range("empty", 0, 10) == b""


def test_get_stream_from_offset(store: ObjectStore) -> None:
    data = os.urandom(300_000)
    store.put_bytes("s.bin", data)
    with store.get_stream("s.bin", 0) as stream:
        assert stream.read() == data
    with store.get_stream("s.bin", 123_457) as stream:
        chunks = []
        while chunk := stream.read(65536):
            chunks.append(chunk)
    assert b"".join(chunks) == data[123_457:]
    with store.get_stream("s.bin", len(data)) as stream:
        assert stream.read() == b""
    with pytest.raises(NotFound):
        store.get_stream("nope", 0)


def test_put_file_and_multipart(store: ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(12 * MiB + 12345)  # above the 5 MiB threshold: 3 parts on S3
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    info = store.put_file("big/big.bin", str(src))
    assert info.size == len(data)
    assert store.head("big/big.bin").etag == info.etag
    if isinstance(store, S3ObjectStore):
        assert info.etag.endswith("-3")  # multipart ETag
    for offset in (0, 5 * MiB - 1, 10 * MiB, len(data) - 7):
        assert store.get_range("big/big.bin", offset, 4096) == data[offset : offset + 4096]
    # A managed (multipart) copy above the threshold.
    moved = store.rename("big/big.bin", "big/moved.bin")
    assert moved.size == len(data)
    assert store.get_range("big/moved.bin", 12 * MiB, 20000) == data[12 * MiB :]


def test_put_file_missing_source(store: ObjectStore, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument):
        store.put_file("x", str(tmp_path / "absent"))


def test_names_with_spaces_and_non_ascii(store: ObjectStore) -> None:
    key = "dir with space/naïve 文件 +%&.txt"
    store.put_bytes(key, b"unicode")
    assert store.head(key).size == 7
    assert store.get_range(key, 0, 100) == b"unicode"
    assert all_entries(store, "") == ([], ["dir with space"])
    assert all_entries(store, "dir with space") == ([key], [])
    store.rename(key, "ünï/ø.txt")
    assert store.get_range("ünï/ø.txt", 0, 100) == b"unicode"


def test_delete_is_idempotent(store: ObjectStore) -> None:
    store.put_bytes("d", b"x")
    store.delete("d")
    store.delete("d")
    store.delete("never/existed")
    with pytest.raises(NotFound):
        store.head("d")


# -- listings ----------------------------------------------------------------


def test_list_dir_files_and_subdirs(store: ObjectStore) -> None:
    store.put_bytes("top.txt", b"1")
    store.put_bytes("d1/x", b"22")
    store.put_bytes("d1/deeper/y", b"333")
    store.make_dir("d2")
    page = store.list_dir("")
    assert page.next_token is None
    assert [o.key for o in page.objects] == ["top.txt"]
    assert sorted(page.prefixes) == ["d1", "d2"]
    page = store.list_dir("d1")
    assert [(o.key, o.size) for o in page.objects] == [("d1/x", 2)]
    assert page.prefixes == ["d1/deeper"]
    assert page.objects[0].etag == store.head("d1/x").etag
    assert all_entries(store, "d1/deeper") == (["d1/deeper/y"], [])
    assert all_entries(store, "d2") == ([], [])


def test_list_missing_dir_is_empty(store: ObjectStore) -> None:
    page = store.list_dir("no/such/dir")
    assert page == ListPage(objects=[], prefixes=[], next_token=None)


def test_list_dir_pagination(store: ObjectStore) -> None:
    for name in ("a", "c", "e"):
        store.put_bytes(f"p/{name}", name.encode())
    store.put_bytes("p/b/inner", b"x")
    store.make_dir("p/d")
    pages: list[ListPage] = []
    token: str | None = None
    while True:
        page = store.list_dir("p", token, limit=2)
        pages.append(page)
        assert len(page.objects) + len(page.prefixes) <= 2
        if page.next_token is None:
            break
        token = page.next_token
    assert len(pages) == 3
    assert sorted(o.key for p in pages for o in p.objects) == ["p/a", "p/c", "p/e"]
    assert sorted(x for p in pages for x in p.prefixes) == ["p/b", "p/d"]


# -- directories and renames -------------------------------------------------


def test_make_dir_and_remove_dir(store: ObjectStore) -> None:
    store.make_dir("newdir")
    store.make_dir("newdir")
    store.make_dir("")  # the root: nothing to do
    assert "newdir" in store.list_dir("").prefixes
    store.remove_dir("newdir")
    store.remove_dir("newdir")
    assert "newdir" not in store.list_dir("").prefixes
    with pytest.raises(InvalidArgument):
        store.remove_dir("")


def test_rename_replaces_destination(store: ObjectStore) -> None:
    store.put_bytes("src", b"new contents")
    store.put_bytes("deep/dst", b"old")
    info = store.rename("src", "deep/dst")
    assert (info.key, info.size) == ("deep/dst", 12)
    assert store.get_range("deep/dst", 0, 100) == b"new contents"
    with pytest.raises(NotFound):
        store.head("src")
    store.rename("deep/dst", "made/parents/f")  # parent directories are created
    assert store.head("made/parents/f").size == 12
    with pytest.raises(NotFound):
        store.rename("missing", "elsewhere")


def test_rename_of_one_version_leaves_other_bytes_alone(store: ObjectStore) -> None:
    """An uploader moves what it put; if another file was put under that name since,
    nothing moves (ObjectChanged) and the other file's bytes stay where they are."""
    mine = store.put_bytes("ckpt/latest.tmp", b"mine")
    theirs = store.put_bytes("ckpt/latest.tmp", b"theirs, put after")
    with pytest.raises(ObjectChanged):
        store.rename("ckpt/latest.tmp", "ckpt/latest.bin", mine.etag)
    assert store.get_range("ckpt/latest.tmp", 0, 100) == b"theirs, put after"
    with pytest.raises(NotFound):
        store.head("ckpt/latest.bin")
    moved = store.rename("ckpt/latest.tmp", "ckpt/latest.bin", theirs.etag)
    assert store.get_range(moved.key, 0, 100) == b"theirs, put after"


def test_rename_dir_moves_nested_contents(store: ObjectStore) -> None:
    store.put_bytes("a/x", b"x")
    store.put_bytes("a/b/y", b"yy")
    store.make_dir("a/empty")
    store.rename_dir("a", "z/a2")
    assert all_entries(store, "a") == ([], [])
    assert "a" not in store.list_dir("").prefixes
    assert all_entries(store, "z/a2") == (["z/a2/x"], ["z/a2/b", "z/a2/empty"])
    assert store.get_range("z/a2/b/y", 0, 10) == b"yy"
    with pytest.raises(NotFound):
        store.rename_dir("a", "q")
    with pytest.raises(InvalidArgument):
        store.rename_dir("z", "z/inside")


def test_statfs(store: ObjectStore) -> None:
    total, free = store.statfs()
    assert total >= free > 0


def test_check_passes(store: ObjectStore) -> None:
    store.check()


# -- store-specific: local ---------------------------------------------------


def test_local_check_errors(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="does not exist"):
        LocalObjectStore(str(tmp_path / "absent")).check()
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectory):
        LocalObjectStore(str(tmp_path / "file")).check()


def test_local_rejects_escaping_keys(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    for key in ("../x", "a/../../x", "/abs", "a//b", "a/"):
        with pytest.raises(InvalidArgument):
            store.head(key)


def test_local_skips_symlinks_and_temp_files(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    store.put_bytes("real", b"x")
    os.symlink(tmp_path / "real", tmp_path / "link")
    os.symlink(tmp_path, tmp_path / "dirlink")
    (tmp_path / ".cloudfs-tmp-leftover").write_bytes(b"partial")
    assert all_entries(store, "") == (["real"], [])


# -- store-specific: pyarrow (local directory and HDFS) ----------------------


@pytest.fixture(params=["arrow-local", "hdfs"])
def arrow_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "hdfs":
        return request.getfixturevalue("hdfs_store")
    return arrow_local_store(tmp_path / "root")


def test_arrow_skips_temp_files(arrow_store: Any) -> None:
    arrow_store.put_bytes("d/real", b"x")
    leftover = arrow_store._path("d/.cloudfs-tmp-leftover")
    with arrow_store.filesystem.open_output_stream(leftover) as out:
        out.write(b"partial")
    assert all_entries(arrow_store, "d") == (["d/real"], [])
    assert all_entries(arrow_store, "") == ([], ["d"])


def test_arrow_no_temp_file_left_after_writes(arrow_store: Any, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(3 * MiB))
    arrow_store.put_file("w/f", str(src))
    arrow_store.put_bytes("w/f", b"small")
    pafs = pytest.importorskip("pyarrow.fs")
    names = [i.base_name for i in arrow_store.filesystem.get_file_info(
        pafs.FileSelector(arrow_store._path("w")))]  # fmt: skip
    assert names == ["f"]


def test_arrow_compression_is_never_guessed(arrow_store: Any) -> None:
    """pyarrow compresses "*.gz" streams by default: objects must keep their bytes."""
    arrow_store.put_bytes("a.gz", b"not gzip")
    assert arrow_store.get_range("a.gz", 0, 100) == b"not gzip"
    with arrow_store.get_stream("a.gz", 4) as stream:
        assert stream.read() == b"gzip"


def test_arrow_rename_onto_directory_is_refused(arrow_store: Any) -> None:
    """HDFS would move the file *into* the directory; rename(2) says EISDIR."""
    arrow_store.put_bytes("f", b"x")
    arrow_store.put_bytes("d/inner", b"y")
    with pytest.raises(IsADirectory):
        arrow_store.rename("f", "d")
    assert all_entries(arrow_store, "d") == (["d/inner"], [])
    with pytest.raises(IsADirectory):
        arrow_store.put_bytes("d", b"z")


def test_arrow_rename_dir_onto_existing(arrow_store: Any) -> None:
    """Like rename(2): an empty target is replaced, a non-empty one refused."""
    arrow_store.put_bytes("src/x", b"x")
    arrow_store.make_dir("empty")
    arrow_store.rename_dir("src", "empty")
    assert all_entries(arrow_store, "empty") == (["empty/x"], [])
    arrow_store.put_bytes("other/y", b"y")
    with pytest.raises(NotEmpty):
        arrow_store.rename_dir("other", "empty")
    arrow_store.put_bytes("file", b"f")
    with pytest.raises(NotADirectory):
        arrow_store.rename_dir("other", "file")
    with pytest.raises(NotADirectory):
        arrow_store.rename_dir("file", "elsewhere")


def test_arrow_remove_dir_refuses_non_empty(arrow_store: Any) -> None:
    """pyarrow's delete_dir is recursive: the store must not be."""
    arrow_store.put_bytes("full/x", b"x")
    with pytest.raises(NotEmpty):
        arrow_store.remove_dir("full")
    assert arrow_store.get_range("full/x", 0, 1) == b"x"
    with pytest.raises(NotADirectory):
        arrow_store.remove_dir("full/x")


def test_arrow_directory_is_not_an_object(arrow_store: Any) -> None:
    arrow_store.make_dir("d")
    with pytest.raises((IsADirectory, NotFound)):
        arrow_store.get_range("d", 0, 1)
    with pytest.raises((IsADirectory, NotFound)):
        arrow_store.get_stream("d", 0)
    with pytest.raises(IsADirectory):
        arrow_store.delete("d")
    with pytest.raises(NotFound):
        arrow_store.rename("d", "e")


def test_arrow_rejects_escaping_and_non_utf8_keys(arrow_store: Any) -> None:
    for key in ("../x", "a/../../x", "/abs", "a//b", "a/"):
        with pytest.raises(InvalidArgument):
            arrow_store.head(key)
    with pytest.raises(IllegalName):
        arrow_store.validate_key("bad-\udcff-name")
    with pytest.raises(IllegalName):
        arrow_store.put_bytes("bad-\udcff-name", b"x")


def test_arrow_check_errors(tmp_path: Path) -> None:
    pafs = pytest.importorskip("pyarrow.fs")
    from cloudfs.ufs.arrow import ArrowObjectStore

    fs = pafs.LocalFileSystem()
    with pytest.raises(NotFound, match="does not exist"):
        ArrowObjectStore(fs, str(tmp_path / "absent"), "file:///absent").check()
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectory):
        ArrowObjectStore(fs, str(tmp_path / "file"), "file:///file").check()
    ArrowObjectStore(fs, str(tmp_path), "file:///tmp").check()


class _CountingFs:
    """A pyarrow filesystem proxy that counts directory listings."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.listings = 0

    def get_file_info(self, what: Any) -> Any:
        if not isinstance(what, str):
            self.listings += 1
        return self._inner.get_file_info(what)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_arrow_pages_come_from_one_listing(tmp_path: Path) -> None:
    """A large HDFS directory is listed once, not once per page."""
    pafs = pytest.importorskip("pyarrow.fs")
    from cloudfs.ufs.arrow import ArrowObjectStore

    for i in range(25):
        (tmp_path / f"f{i:02}").write_bytes(b"x")
    fs = _CountingFs(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()))
    store = ArrowObjectStore(fs, "", "file:///x")
    objects, _ = all_entries(store, "", limit=10)
    assert objects == [f"f{i:02}" for i in range(25)]
    assert fs.listings == 1
    # A token with no snapshot (another process, or expired) lists again.
    page = store.list_dir("", "f19", limit=10)
    assert [o.key for o in page.objects] == [f"f{i}" for i in range(20, 25)]
    assert fs.listings == 2


class _HdfsLikeFs(_CountingFs):
    """Behaves as pyarrow's HDFS does when the namenode cannot be reached: a stat
    answers "not found", every other call fails with libhdfs's errno 255."""

    def get_file_info(self, what: Any) -> Any:
        pafs = pytest.importorskip("pyarrow.fs")
        if isinstance(what, str):
            return pafs.FileInfo(what, pafs.FileType.NotFound)
        raise OSError(255, "HDFS list directory failed. Detail: [errno 255] Unknown error 255")

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise OSError(255, "Opening HDFS file failed. Detail: [errno 255] Unknown error 255")

    open_input_stream = open_input_file = open_output_stream = _fail
    delete_file = delete_dir = create_dir = move = _fail


def test_arrow_unreachable_namenode_is_never_not_found() -> None:
    """pyarrow hides HDFS stat errors as "not found": the store must not believe it."""
    pytest.importorskip("pyarrow.fs")
    from cloudfs.ufs.arrow import ArrowObjectStore

    store = ArrowObjectStore(_HdfsLikeFs(None), "/data", "hdfs://nn:8020/data")
    for call in (
        lambda: store.head("k"),
        lambda: store.list_dir(""),
        lambda: store.get_range("k", 0, 1),
        lambda: store.get_stream("k", 0),
        lambda: store.delete("k"),
        lambda: store.remove_dir("d"),
        lambda: store.rename("a", "b"),
        lambda: store.rename_dir("a", "b"),
        lambda: store.put_bytes("k", b"x"),
    ):
        with pytest.raises(RemoteIOError) as info:
            call()
        assert info.value.errno == errno.EIO  # not libhdfs's 255
    with pytest.raises(RemoteIOError, match="cannot reach hdfs://nn:8020/data"):
        store.check()


class _CoarseClockFs(_CountingFs):
    """Reports mtimes in whole seconds, as libhdfs does."""

    def get_file_info(self, what: Any) -> Any:
        pafs = pytest.importorskip("pyarrow.fs")

        def coarse(info: Any) -> Any:
            if info.type != pafs.FileType.File:
                return info
            mtime_ns = info.mtime_ns // 10**9 * 10**9
            return pafs.FileInfo(info.path, info.type, mtime_ns=mtime_ns, size=info.size)

        found = self._inner.get_file_info(what)
        return coarse(found) if isinstance(what, str) else [coarse(i) for i in found]


def test_arrow_same_size_rewrite_within_a_second_changes_etag(tmp_path: Path) -> None:
    pafs = pytest.importorskip("pyarrow.fs")
    from cloudfs.ufs.arrow import ArrowObjectStore

    fs = _CoarseClockFs(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()))
    store = ArrowObjectStore(fs, "", "file:///x")
    etags = [store.put_bytes("k", data).etag for data in (b"one", b"two", b"six")]
    assert len(set(etags)) == 3
    assert store.head("k").etag == etags[-1]
    assert store.get_range("k", 0, 10) == b"six"


def test_hdfs_refuses_colons(tmp_path: Path) -> None:
    pafs = pytest.importorskip("pyarrow.fs")
    from cloudfs.ufs.hdfs import HdfsObjectStore

    store = HdfsObjectStore(pafs.LocalFileSystem(), str(tmp_path), "hdfs://nn/x")
    store.validate_key("dir/file.txt")
    with pytest.raises(InvalidArgument):  # EINVAL: a name HDFS cannot store
        store.validate_key("dir/a:b")


@pytest.mark.parametrize(
    ("make", "expected", "code"),
    [
        (lambda: FileNotFoundError(errno.ENOENT, "gone"), NotFound, errno.ENOENT),
        (lambda: PermissionError(errno.EACCES, "denied"), UfsAccessDenied, errno.EACCES),
        (lambda: OSError(errno.EDQUOT, "quota"), NoSpace, errno.ENOSPC),
        (lambda: OSError(255, "java.net.ConnectException"), RemoteIOError, errno.EIO),
        (lambda: OSError("no errno"), RemoteIOError, errno.EIO),
        (lambda: OSError(errno.ESTALE, "lease expired"), RemoteIOError, errno.ESTALE),
    ],
    ids=["enoent", "eacces", "edquot", "libhdfs-255", "no-errno", "estale"],
)
def test_translate_arrow_errors(make: Any, expected: type[Exception], code: int) -> None:
    pytest.importorskip("pyarrow")
    from cloudfs.ufs.arrow_errors import translate_arrow_error

    err = make()
    result = translate_arrow_error(err, "some/key")
    assert isinstance(result, expected)
    assert result.errno == code
    assert result.__cause__ is err
    assert "some/key" in str(result)


def test_translate_arrow_invalid() -> None:
    pa = pytest.importorskip("pyarrow")
    from cloudfs.ufs.arrow_errors import translate_arrow_error

    assert isinstance(translate_arrow_error(pa.ArrowInvalid("bad path"), "k"), InvalidArgument)


# -- store-specific: S3 ------------------------------------------------------


def test_s3_markers_become_prefixes(s3_store: tuple[S3ObjectStore, Any, str]) -> None:
    store, client, base = s3_store
    bucket = store.uri.removeprefix("s3://").split("/")[0]
    for key in ("m/", "m/sub/", "m/sub/inner", "m/only-marker/", "m/f"):
        client.put_object(Bucket=bucket, Key=base + key, Body=b"" if key.endswith("/") else b"x")
    page = store.list_dir("m")
    assert [o.key for o in page.objects] == ["m/f"]
    assert page.prefixes == ["m/only-marker", "m/sub"]  # each once; "m/" itself not listed


def test_s3_object_and_prefix_with_same_name(s3_store: tuple[S3ObjectStore, Any, str]) -> None:
    store, _, _ = s3_store
    store.put_bytes("a", b"file")
    store.put_bytes("a/b", b"child")
    page = store.list_dir("")
    assert [o.key for o in page.objects] == ["a"]
    assert page.prefixes == ["a"]


def test_s3_prefix_is_prepended(s3_store: tuple[S3ObjectStore, Any, str]) -> None:
    store, client, base = s3_store
    bucket = store.uri.removeprefix("s3://").split("/")[0]
    store.put_bytes("k/v", b"1")
    store.make_dir("dd")
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"])
    assert keys == [base + "dd/", base + "k/v"]


def test_s3_missing_bucket(aws_env: None, s3_server: S3Server, tmp_path: Path) -> None:
    store = S3ObjectStore("no-such-bucket-here", "", s3_config(s3_server.endpoint))
    with pytest.raises(NotFound) as info:
        store.check()
    assert str(info.value) == "bucket 'no-such-bucket-here' does not exist"
    with pytest.raises(NotFound):
        store.head("k")
    with pytest.raises(NotFound):
        store.list_dir("")
    src = tmp_path / "f"
    src.write_bytes(b"data")
    with pytest.raises(NotFound):
        store.put_file("k", str(src))  # boto3 wraps this one in S3UploadFailedError


def test_s3_unreachable_endpoint(aws_env: None) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    store = S3ObjectStore("bkt", "", s3_config(endpoint, connect_timeout=1, max_attempts=2))
    start = time.monotonic()
    with pytest.raises(RemoteIOError) as info:
        store.check()
    assert time.monotonic() - start < 10
    assert str(info.value) == f"cannot reach S3 endpoint URL: {endpoint}"
    assert isinstance(info.value.__cause__, EndpointConnectionError)
    with pytest.raises(RemoteIOError):
        store.get_range("k", 0, 1)


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A socket that accepts TCP connections (the kernel's backlog) but never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_s3_server_that_never_answers(aws_env: None, silent_endpoint: str) -> None:
    config = s3_config(silent_endpoint, connect_timeout=1, read_timeout=1, max_attempts=2)
    store = S3ObjectStore("bkt", "", config)
    start = time.monotonic()
    with pytest.raises(RemoteIOError, match="did not answer within 1s"):
        store.check()
    with pytest.raises(RemoteIOError):
        store.head("k")
    assert time.monotonic() - start < 20  # two calls, each 2 attempts of 1 s plus back-off


def test_s3_endpoint_from_environment(
    aws_env: None, s3_server: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No endpoint in S3Config: boto3's own resolution (AWS_ENDPOINT_URL_S3) is used."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint)
    store = S3ObjectStore(s3_bucket, "", s3_config(None))
    assert store.endpoint_url == s3_server.endpoint
    store.check()
    store.put_bytes("via-env", b"ok")
    assert store.get_range("via-env", 0, 2) == b"ok"


@pytest.fixture(scope="module")
def auth_s3_server() -> Iterator[S3Server]:
    """A private moto server that verifies credentials (the shared one accepts anything)."""
    with running_s3_server() as server:
        server.client().create_bucket(Bucket="auth-bucket")  # type: ignore[no-untyped-call]
        req = urllib.request.Request(
            server.endpoint + "/moto-api/reset-auth",
            data=b"0",  # authenticate from the next request on
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(req, timeout=10).read()
        yield server


def test_s3_bad_credentials(
    aws_env: None, auth_s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGWRONGWRONG1")
    store = S3ObjectStore("auth-bucket", "", s3_config(auth_s3_server.endpoint))
    with pytest.raises(UfsAccessDenied) as info:
        store.check()
    assert str(info.value) == "access to bucket 'auth-bucket' denied: check credentials"
    with pytest.raises(UfsAccessDenied):
        store.list_dir("")
    with pytest.raises(UfsAccessDenied):
        store.head("k")


# -- s3_errors.translate (no server) -----------------------------------------


def client_error(code: str, status: int) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": "msg"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "GetObject")


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("NoSuchKey", 404, NotFound),
        ("404", 404, NotFound),
        ("NoSuchBucket", 404, NotFound),
        ("AccessDenied", 403, UfsAccessDenied),
        ("InvalidAccessKeyId", 403, UfsAccessDenied),
        ("SignatureDoesNotMatch", 403, UfsAccessDenied),
        ("403", 403, UfsAccessDenied),
        ("InternalError", 500, RemoteIOError),
        ("SlowDown", 503, RemoteIOError),
        ("InvalidRange", 416, InvalidArgument),
    ],
)
def test_translate_client_errors(code: str, status: int, expected: type[Exception]) -> None:
    err = client_error(code, status)
    result = translate(err, "some/key")
    assert type(result) is expected
    assert result.__cause__ is err
    assert "some/key" in str(result)


def test_translate_transport_errors() -> None:
    refused = EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
    assert type(translate(refused, "k")) is RemoteIOError
    timeout = ReadTimeoutError(endpoint_url="http://127.0.0.1:1")
    assert type(translate(timeout, "k")) is RemoteIOError


def test_translate_finds_wrapped_client_error() -> None:
    """boto3's upload_file re-raises ClientError as S3UploadFailedError, context only."""
    from boto3.exceptions import S3UploadFailedError

    try:
        try:
            raise client_error("AccessDenied", 403)
        except ClientError as inner:
            raise S3UploadFailedError(f"Failed to upload: {inner}")  # noqa: B904
    except S3UploadFailedError as outer:
        assert type(translate(outer, "k")) is UfsAccessDenied


def test_s3_key_limit_counts_the_prefix_and_a_directory_marker(
    s3_store: tuple[S3ObjectStore, Any, str],
) -> None:
    store, _, base = s3_store
    room = 1024 - len(base)
    store.validate_key("k" * room)
    store.validate_key("d" * (room - 1), directory=True)  # its marker is key + "/"
    with pytest.raises(NameTooLong):
        store.validate_key("k" * (room + 1))
    with pytest.raises(NameTooLong):
        store.validate_key("d" * room, directory=True)


def test_s3_rename_dir_refuses_before_copying_a_key_too_long(
    s3_store: tuple[S3ObjectStore, Any, str],
) -> None:
    """Every key below moves: the longest one, even one the tree never listed, decides."""
    store, _, base = s3_store
    deep = "a/" + "n" * (1024 - len(base) - 2)  # exactly 1024 bytes with the prefix
    store.put_bytes(deep, b"x")
    store.put_bytes("a/short", b"y")
    with pytest.raises(NameTooLong):
        store.rename_dir("a", "ab")
    assert sorted(all_entries(store, "")[1]) == ["a"]
    assert store.get_range(deep, 0, 1) == b"x"
    store.rename_dir("a", "b")  # the same length fits
    assert store.get_range("b/" + deep[2:], 0, 1) == b"x"
