"""The KV protocol conformance suite, run on every engine.

The etcd engine runs on the session's etcd (``testkit/etcd.py``; skipped
when etcd is not installed, failed under CI), each test under its own prefix.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudfs.meta.engine.kv import KVEngine, KVTxn
from cloudfs.meta.engine.kv_etcd import EtcdKV
from cloudfs.meta.engine.kv_lmdb import LmdbKV
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.meta.engine.kv_retry import write_txn


@pytest.fixture(params=["memory", "lmdb", "etcd"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KVEngine]:
    kv: KVEngine
    if request.param == "memory":
        kv = MemoryKV()
    elif request.param == "lmdb":
        kv = LmdbKV(str(tmp_path / "kv"))
    else:
        endpoints = request.getfixturevalue("etcd").endpoints
        kv = EtcdKV(endpoints, request.getfixturevalue("etcd_prefix"))
    yield kv
    kv.close()


def fill(engine: KVEngine, items: dict[bytes, bytes]) -> None:
    with engine.transaction(write=True) as txn:
        for key, value in items.items():
            txn.put(key, value)


def test_put_get_delete(engine: KVEngine) -> None:
    fill(engine, {b"a": b"1", b"b": b""})
    with engine.transaction(write=False) as txn:
        assert txn.get(b"a") == b"1"
        assert txn.get(b"b") == b""
        assert txn.get(b"c") is None
    with engine.transaction(write=True) as txn:
        txn.delete(b"a")
        txn.delete(b"missing")  # not an error
        txn.put(b"b", b"2")
    with engine.transaction(write=False) as txn:
        assert txn.get(b"a") is None
        assert txn.get(b"b") == b"2"


def test_write_sees_own_writes(engine: KVEngine) -> None:
    with engine.transaction(write=True) as txn:
        txn.put(b"p1", b"x")
        txn.put(b"p2", b"y")
        assert txn.get(b"p1") == b"x"
        assert list(txn.scan(b"p")) == [(b"p1", b"x"), (b"p2", b"y")]
        txn.delete(b"p1")
        assert txn.get(b"p1") is None
        assert list(txn.scan(b"p")) == [(b"p2", b"y")]


def test_exception_aborts(engine: KVEngine) -> None:
    fill(engine, {b"keep": b"old"})
    with pytest.raises(RuntimeError), engine.transaction(write=True) as txn:
        txn.put(b"keep", b"new")
        txn.put(b"added", b"x")
        txn.delete(b"keep")
        raise RuntimeError("boom")
    with engine.transaction(write=False) as txn:
        assert txn.get(b"keep") == b"old"
        assert txn.get(b"added") is None
        assert list(txn.scan(b"")) == [(b"keep", b"old")]


def test_read_transaction_rejects_writes(engine: KVEngine) -> None:
    with engine.transaction(write=False) as txn:
        with pytest.raises(ValueError):
            txn.put(b"a", b"1")
        with pytest.raises(ValueError):
            txn.delete(b"a")


def test_scan_prefix_order_start_after_limit(engine: KVEngine) -> None:
    keys = [b"D\x00\x01b", b"D\x00\x01a", b"D\x00\x01\xff", b"D\x00\x02a", b"C", b"D\x00\x01"]
    fill(engine, {k: k[::-1] for k in keys})
    with engine.transaction(write=False) as txn:
        got = [k for k, _ in txn.scan(b"D\x00\x01")]
        assert got == [b"D\x00\x01", b"D\x00\x01a", b"D\x00\x01b", b"D\x00\x01\xff"]
        assert [v for _, v in txn.scan(b"D\x00\x01", limit=1)] == [b"\x01\x00D"]
        after = [k for k, _ in txn.scan(b"D\x00\x01", start_after=b"D\x00\x01a")]
        assert after == [b"D\x00\x01b", b"D\x00\x01\xff"]
        # start_after need not exist
        after = [k for k, _ in txn.scan(b"D\x00\x01", start_after=b"D\x00\x01aa", limit=1)]
        assert after == [b"D\x00\x01b"]
        # start_after before the prefix means "from the start of the prefix"
        assert len(list(txn.scan(b"D\x00\x01", start_after=b"A"))) == 4
        assert list(txn.scan(b"D\x00\x01", start_after=b"D\x00\x01\xff")) == []
        assert list(txn.scan(b"E")) == []
        assert [k for k, _ in txn.scan(b"")] == sorted(keys)
        assert list(txn.scan(b"D", limit=0)) == []


def test_large_scan_pages(engine: KVEngine) -> None:
    fill(engine, {b"k%05d" % i: b"v" for i in range(3000)})
    seen: list[bytes] = []
    last: bytes | None = None
    while True:
        with engine.transaction(write=False) as txn:
            page = [k for k, _ in txn.scan(b"k", start_after=last, limit=700)]
        if not page:
            break
        seen += page
        last = page[-1]
    assert seen == [b"k%05d" % i for i in range(3000)]


def test_concurrent_writers_are_serializable(engine: KVEngine) -> None:
    """Read-modify-write from 8 threads loses no update (etcd: conflicts are re-run)."""
    fill(engine, {b"n": (0).to_bytes(8, "big")})

    def increment(txn: KVTxn) -> None:
        value = int.from_bytes(txn.get(b"n") or b"", "big")
        txn.put(b"n", (value + 1).to_bytes(8, "big"))

    def bump() -> None:
        for _ in range(100):
            write_txn(engine, increment)

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with engine.transaction(write=False) as txn:
        assert int.from_bytes(txn.get(b"n") or b"", "big") == 800


def test_readers_run_alongside_writers(engine: KVEngine) -> None:
    """A read transaction sees either all of a write transaction or none of it."""
    fill(engine, {b"a": b"0", b"b": b"0"})
    stop = threading.Event()
    torn: list[tuple[bytes | None, bytes | None]] = []

    def read() -> None:
        while not stop.is_set():
            with engine.transaction(write=False) as txn:
                pair = (txn.get(b"a"), txn.get(b"b"))
            if pair[0] != pair[1]:
                torn.append(pair)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(300):
        with engine.transaction(write=True) as txn:
            txn.put(b"a", b"%d" % i)
            txn.put(b"b", b"%d" % i)
    stop.set()
    reader.join()
    assert torn == []


def test_lmdb_persists_across_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "kv")
    kv = LmdbKV(path)
    fill(kv, {b"x": b"1"})
    kv.close()
    kv = LmdbKV(path)
    with kv.transaction(write=False) as txn:
        assert txn.get(b"x") == b"1"
    kv.close()


def test_get_many_reads_like_get_and_sees_own_writes(engine: KVEngine) -> None:
    fill(engine, {b"m%03d" % i: b"v%d" % i for i in range(300)})  # more than one batch
    keys = [b"m%03d" % i for i in range(0, 300, 2)] + [b"absent", b"m000"]
    with engine.transaction(write=False) as txn:
        assert txn.get_many(keys) == [txn.get(k) for k in keys]
        assert txn.get_many([]) == []
    with engine.transaction(write=True) as txn:
        txn.put(b"m001", b"new")
        txn.delete(b"m002")
        assert txn.get_many([b"m001", b"m002", b"m003"]) == [b"new", None, b"v3"]


def test_get_many_reads_one_snapshot(engine: KVEngine) -> None:
    fill(engine, {b"s1": b"old", b"s2": b"old"})
    with engine.transaction(write=False) as txn:
        assert txn.get(b"s1") == b"old"  # the snapshot starts here
        if isinstance(engine, EtcdKV):  # only etcd lets another writer in meanwhile
            fill(engine, {b"s2": b"new"})
        assert txn.get_many([b"s2"]) == [b"old"]
