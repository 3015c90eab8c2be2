"""FaultyObjectStore over a LocalObjectStore: reproducible failures, delays and stats."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cloudfs.errors import InvalidArgument, NotFound, RemoteIOError
from cloudfs.ufs.faults import OPS, FaultyObjectStore
from cloudfs.ufs.interface import ObjectStore
from cloudfs.ufs.local import LocalObjectStore


@pytest.fixture
def inner(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(str(tmp_path))


def test_no_faults_forwards_everything(inner: LocalObjectStore, tmp_path: Path) -> None:
    store: ObjectStore = FaultyObjectStore(inner)  # mypy: it satisfies the protocol
    assert isinstance(store, FaultyObjectStore)
    assert store.uri == inner.uri
    store.check()
    assert store.put_bytes("a/b", b"xyz").size == 3
    src = tmp_path / "src.bin"
    src.write_bytes(b"file")
    store.put_file("a/c", str(src))
    assert store.head("a/b").size == 3
    assert store.get_range("a/b", 1, 5) == b"yz"
    with store.get_stream("a/b", 1) as stream:
        assert stream.read() == b"yz"
    assert [o.key for o in store.list_dir("a").objects] == ["a/b", "a/c"]
    store.rename("a/c", "a/d")
    store.make_dir("e")
    store.remove_dir("e")
    store.rename_dir("a", "f")
    store.delete("f/b")
    assert store.statfs()[0] > 0
    stats = store.stats
    assert stats.total_failures == 0
    assert stats.calls == {op: 1 for op in OPS}  # every protocol method is wrapped


def test_always_failing_before_the_call_has_no_effect(inner: LocalObjectStore) -> None:
    store = FaultyObjectStore(inner, fail_ratio=1.0)
    with pytest.raises(RemoteIOError, match="injected fault"):
        store.put_bytes("k", b"x")
    with pytest.raises(NotFound):
        inner.head("k")
    assert store.stats.failures == {"put_bytes": 1}


def test_failing_after_the_call_keeps_its_effect(inner: LocalObjectStore) -> None:
    store = FaultyObjectStore(inner, fail_ratio=1.0, fail_after=True)
    with pytest.raises(RemoteIOError, match="after the call"):
        store.put_bytes("k", b"x")
    assert inner.head("k").size == 1  # the write happened; only the reply was "lost"
    with pytest.raises(RemoteIOError):
        store.get_stream("k", 0)  # the opened stream is closed, not leaked


def test_inner_errors_pass_through(inner: LocalObjectStore) -> None:
    store = FaultyObjectStore(inner)
    with pytest.raises(NotFound):
        store.head("missing")


def test_ops_limits_faults(inner: LocalObjectStore) -> None:
    store = FaultyObjectStore(inner, fail_ratio=1.0, ops={"head"})
    store.put_bytes("k", b"x")
    with pytest.raises(RemoteIOError):
        store.head("k")
    assert store.get_range("k", 0, 1) == b"x"
    assert store.stats.failures == {"head": 1}


def test_same_seed_same_faults(inner: LocalObjectStore) -> None:
    inner.put_bytes("k", b"x")

    def pattern(seed: int) -> list[bool]:
        store = FaultyObjectStore(inner, fail_ratio=0.5, seed=seed)
        outcome = []
        for _ in range(200):
            try:
                store.head("k")
                outcome.append(True)
            except RemoteIOError:
                outcome.append(False)
        return outcome

    first = pattern(7)
    assert first == pattern(7)
    assert first != pattern(8)
    assert 60 < first.count(False) < 140


def test_delay_applies_to_each_call(inner: LocalObjectStore) -> None:
    store = FaultyObjectStore(inner, delay=0.05)
    start = time.monotonic()
    store.statfs()
    store.statfs()
    assert time.monotonic() - start >= 0.1


def test_configure_heals_and_validates(inner: LocalObjectStore) -> None:
    store = FaultyObjectStore(inner, fail_ratio=1.0)
    with pytest.raises(RemoteIOError):
        store.statfs()
    store.configure(fail_ratio=0.0)
    store.statfs()
    with pytest.raises(InvalidArgument):
        store.configure(fail_ratio=1.5)
    with pytest.raises(InvalidArgument):
        store.configure(ops={"no_such_op"})
    with pytest.raises(InvalidArgument):
        FaultyObjectStore(inner, delay=-1)
    assert "get_stream" in OPS


def test_stats_is_a_snapshot(inner: LocalObjectStore) -> None:
    store = FaultyObjectStore(inner)
    before = store.stats
    store.statfs()
    assert before.total_calls == 0
    assert store.stats.calls == {"statfs": 1}
    with pytest.raises(TypeError):
        store.stats.calls["statfs"] = 5  # type: ignore[index]
