"""Retrying conflicting transactions, and the etcd engine's key-range arithmetic (no server)."""

from __future__ import annotations

import errno

import pytest

from cloudfs import errors
from cloudfs.meta.engine.etcd_txn import _coalesce, prefix_end
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.meta.engine.kv_retry import retry_conflicts, write_txn


def test_a_conflict_is_run_again_until_it_commits() -> None:
    pauses: list[float] = []
    calls = iter([errors.TxnConflict("lost"), errors.TxnConflict("lost"), "done"])

    def attempt() -> str:
        outcome = next(calls)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert retry_conflicts(attempt, sleep=pauses.append) == "done"
    assert len(pauses) == 2 and all(0 <= p <= 0.2 for p in pauses)


def test_endless_conflicts_become_eio_and_other_errors_pass_through() -> None:
    def always() -> None:
        raise errors.TxnConflict("lost")

    with pytest.raises(errors.RemoteIOError) as info:
        retry_conflicts(always, tries=3, sleep=lambda _: None)
    assert info.value.errno == errno.EIO
    assert isinstance(info.value.__cause__, errors.TxnConflict)
    assert errors.TxnConflict().errno == errno.EAGAIN

    runs: list[int] = []

    def not_found() -> None:
        runs.append(1)
        raise errors.NotFound("x")

    with pytest.raises(errors.NotFound):
        retry_conflicts(not_found)
    assert runs == [1]


def test_write_txn_commits_the_body_once_over_a_serializing_engine() -> None:
    kv = MemoryKV()
    assert write_txn(kv, lambda txn: txn.put(b"k", b"v")) is None
    with kv.transaction(write=False) as txn:
        assert txn.get(b"k") == b"v"


def test_prefix_end() -> None:
    assert prefix_end(b"ab") == b"ac"
    assert prefix_end(b"a\xff\xff") == b"b"
    assert prefix_end(b"\xff") == b"\0"  # no end: every key from the start on


def test_scanned_ranges_coalesce() -> None:
    pages = [(b"d/", b"d/m\0"), (b"d/m\0", b"d0"), (b"a", b"b"), (b"a", b"b")]
    assert _coalesce(pages) == [(b"a", b"b"), (b"d/", b"d0")]
    assert _coalesce([(b"x", b"\0"), (b"y", b"z")]) == [(b"x", b"\0")]
    assert _coalesce([(b"a", b"c"), (b"b", b"\0")]) == [(b"a", b"\0")]
