"""URI parsing for ``cloudfs mount``: every bad URI is a one-line UsageError."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cloudfs.config import S3Config
from cloudfs.errors import StartupError, UsageError
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
        ("hdfs://", "no namenode"),
        ("hdfs:///data", "no namenode"),
        ("hdfs://:8020/data", "no namenode"),
        ("hdfs://nn:abc/data", "invalid HDFS namenode port 'abc'"),
        ("hdfs://nn:/data", "invalid HDFS namenode port"),
        ("hdfs://nn:0/data", "invalid HDFS namenode port '0'"),
        ("hdfs://nn:70000/data", "invalid HDFS namenode port"),
        ("hdfs://bad_host!:8020/data", "invalid HDFS namenode host"),
        ("hdfs://[not-ipv6]:8020/data", "invalid storage URI"),
        ("hdfs://[::1]x/data", "invalid HDFS namenode address"),
        ("hdfs://alice@nn:8020/data", "HADOOP_USER_NAME"),
        ("hdfs://nn:8020/data?user=alice", "query"),
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


# -- hdfs:// -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "host", "port", "prefix", "normalized"),
    [
        ("hdfs://namenode:8020/datasets", "namenode", 8020, "datasets", None),
        ("hdfs://namenode:8020/datasets/", "namenode", 8020, "datasets", None),
        ("HDFS://NameNode.Example.com:9000//a//b/", "namenode.example.com", 9000, "a/b", None),
        ("hdfs://nn:8020/a/./b/../c", "nn", 8020, "a/c", "hdfs://nn:8020/a/c"),
        ("hdfs://nn:8020", "nn", 8020, "", "hdfs://nn:8020"),
        ("hdfs://nn:8020/", "nn", 8020, "", "hdfs://nn:8020"),
        ("hdfs://mycluster/data", "mycluster", 0, "data", "hdfs://mycluster/data"),
        ("hdfs://10.0.0.5:8020/x", "10.0.0.5", 8020, "x", None),
        ("hdfs://[::1]:8020/x", "::1", 8020, "x", None),
    ],
)
def test_parse_hdfs_uri(
    uri: str, host: str, port: int, prefix: str, normalized: str | None
) -> None:
    parsed = parse_uri(uri)
    assert (parsed.scheme, parsed.location, parsed.port, parsed.prefix) == (
        "hdfs",
        host,
        port,
        prefix,
    )
    expected = normalized or f"hdfs://{uri.split('://', 1)[1].lower().strip('/')}".replace(
        "//a//b", "/a/b"
    )
    assert parsed.normalized == expected
    validate_uri(uri)


def test_hdfs_store_id_is_normalized() -> None:
    ident = store_id("hdfs://nn:8020/data")
    assert ident == store_id("hdfs://NN:8020/data/")
    assert ident == store_id("hdfs://nn:8020//data")
    assert ident != store_id("hdfs://nn:8021/data")  # another cluster
    assert ident != store_id("hdfs://nn/data")  # port from the Hadoop configuration
    assert ident != store_id("hdfs://nn:8020/other")
    assert ident != store_id("s3://nn/data")


class _FakeHadoopFileSystem:
    """Records how ``pyarrow.fs.HadoopFileSystem`` was called; contacts nothing."""

    calls: list[tuple[Any, ...]] = []

    def __init__(self, host: str, port: int, **kwargs: Any) -> None:
        self.calls.append((host, port, kwargs))


def test_hdfs_uri_opens_hdfs_store(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyarrow.fs")
    from cloudfs.ufs import hdfs

    monkeypatch.setattr(hdfs.pafs, "HadoopFileSystem", _FakeHadoopFileSystem)
    monkeypatch.setattr(_FakeHadoopFileSystem, "calls", [])
    monkeypatch.setenv("HADOOP_USER_NAME", "trainer")
    store = open_store("hdfs://NameNode:8020/datasets/", S3Config())
    assert isinstance(store, hdfs.HdfsObjectStore)
    assert store.uri == "hdfs://namenode:8020/datasets"
    ((host, port, kwargs),) = _FakeHadoopFileSystem.calls
    assert (host, port, kwargs["user"], kwargs["replication"]) == ("namenode", 8020, "trainer", 0)
    conf = kwargs["extra_conf"]
    assert conf["ipc.client.connect.max.retries.on.timeouts"] == "2"  # not Hadoop's 45
    assert int(conf["ipc.client.rpc-timeout.ms"]) > 0  # an RPC never waits forever
    assert store._path("train/0001.jpg") == "/datasets/train/0001.jpg"

    monkeypatch.delenv("HADOOP_USER_NAME")
    root = open_store("hdfs://[::1]:9000", S3Config())
    assert root.uri == "hdfs://[::1]:9000"
    assert _FakeHadoopFileSystem.calls[-1][:2] == ("[::1]", 9000)
    assert _FakeHadoopFileSystem.calls[-1][2]["user"] is None
    assert root._path("k") == "/k"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("message", "needles"),
    [
        ("Unable to load libjvm\ndlopen(/usr/lib/jvm/x) failed", ["libjvm", "JAVA_HOME"]),
        ("Unable to load libhdfs\ndlopen(libhdfs.so) failed", ["libhdfs", "HADOOP_HOME"]),
        ("HDFS connection failed", ["HDFS connection failed", "hadoop classpath --glob"]),
    ],
)
def test_hdfs_client_that_cannot_load_is_one_line(
    monkeypatch: pytest.MonkeyPatch, message: str, needles: list[str]
) -> None:
    pytest.importorskip("pyarrow.fs")
    from cloudfs.ufs import hdfs

    def fail(*args: Any, **kwargs: Any) -> None:
        raise OSError(message)

    monkeypatch.setattr(hdfs.pafs, "HadoopFileSystem", fail)
    with pytest.raises(StartupError) as info:
        open_store("hdfs://nn:8020/data", S3Config())
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("cannot use hdfs://nn:8020: ")
    for needle in needles:
        assert needle in text


def test_hdfs_without_pyarrow_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "cloudfs.ufs.hdfs", raising=False)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ModuleNotFoundError
    with pytest.raises(StartupError, match=r"pip install 'cloudfs\[hdfs\]'") as info:
        open_store("hdfs://nn:8020/data", S3Config())
    assert "\n" not in str(info.value)


def test_hdfs_without_java_fails_in_one_line(tmp_path: Path) -> None:
    """The real pyarrow, in a fresh process: no JVM or libhdfs where it looks."""
    pytest.importorskip("pyarrow.fs")
    env = {k: v for k, v in os.environ.items() if k not in ("HADOOP_HOME", "ARROW_LIBHDFS_DIR")}
    env["JAVA_HOME"] = str(tmp_path)  # no libjvm in there
    env["LD_LIBRARY_PATH"] = ""
    code = (
        "from cloudfs.config import S3Config\n"
        "from cloudfs.errors import StartupError\n"
        "from cloudfs.ufs.factory import open_store\n"
        "try:\n"
        "    open_store('hdfs://127.0.0.1:8020/data', S3Config())\n"
        "except StartupError as e:\n"
        "    print('StartupError:', e)\n"
        "else:\n"
        "    print('loaded')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    if lines == ["loaded"]:
        pytest.skip("Java and libhdfs load on this machine (system library path)")
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith("StartupError: cannot use hdfs://127.0.0.1:8020: Unable to load lib")
