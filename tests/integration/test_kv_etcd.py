"""The etcd engine against a real etcd: conflicts, phantoms, lost answers, failover, limits.

The protocol's own suite runs on etcd too (tests/contract/test_kv.py); these
are the properties only an optimistic, networked engine has.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cloudfs import errors
from cloudfs.etcdpb import rpc_pb2 as pb
from cloudfs.meta.engine.etcd_grpc import EtcdClient, EtcdError
from cloudfs.meta.engine.kv_etcd import EtcdKV, open_engine
from cloudfs.meta.engine.kv_retry import write_txn
from cloudfs.types import ROOT_INODE, InodeId
from testkit.etcd import EtcdCluster, require_etcd, running_etcd
from testkit.meta_world import MetaWorld, make_world
from testkit.servers import free_port


@pytest.fixture
def kv(etcd: EtcdCluster, etcd_prefix: bytes) -> Iterator[EtcdKV]:
    engine = EtcdKV(etcd.endpoints, etcd_prefix)
    yield engine
    engine.close()


def put(kv: EtcdKV, key: bytes, value: bytes) -> None:
    with kv.transaction(write=True) as txn:
        txn.put(key, value)


def get(kv: EtcdKV, key: bytes) -> bytes | None:
    with kv.transaction(write=False) as txn:
        return txn.get(key)


def test_write_write_conflict_raises_for_the_loser(kv: EtcdKV) -> None:
    put(kv, b"k", b"0")
    both_read = threading.Barrier(2)
    outcomes: list[str] = []

    def writer(value: bytes) -> None:
        try:
            with kv.transaction(write=True) as txn:
                txn.get(b"k")
                both_read.wait(timeout=10)
                txn.put(b"k", value)
            outcomes.append("committed")
        except errors.TxnConflict as exc:
            assert exc.errno == 11  # EAGAIN
            outcomes.append("conflict")

    threads = [threading.Thread(target=writer, args=(v,)) for v in (b"a", b"b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["committed", "conflict"]
    assert get(kv, b"k") in (b"a", b"b")


def test_write_txn_reruns_the_loser(kv: EtcdKV) -> None:
    put(kv, b"n", b"0")
    both_read = threading.Barrier(2)
    runs: list[int] = []

    def increment(txn: Any) -> None:
        value = int(txn.get(b"n"))
        runs.append(value)
        if len(runs) <= 2:
            both_read.wait(timeout=10)  # the first run of each thread reads the same value
        txn.put(b"n", b"%d" % (value + 1))

    threads = [threading.Thread(target=write_txn, args=(kv, increment)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert get(kv, b"n") == b"2"
    assert sorted(runs) == [0, 0, 1]  # the loser ran again and saw the winner's write


def scanned_then(kv: EtcdKV, other: Any, **scan: Any) -> None:
    """Scan "d/" in a write txn, let ``other`` commit meanwhile, then write and commit."""
    with kv.transaction(write=True) as txn:
        list(txn.scan(b"d/", **scan))
        other()
        txn.put(b"result", b"x")


def test_a_key_inserted_into_a_scanned_range_is_a_conflict(kv: EtcdKV) -> None:
    put(kv, b"d/a", b"1")
    with pytest.raises(errors.TxnConflict):
        scanned_then(kv, lambda: put(kv, b"d/b", b"phantom"))
    assert get(kv, b"result") is None


def test_a_key_deleted_from_a_scanned_range_is_a_conflict(kv: EtcdKV) -> None:
    put(kv, b"d/a", b"1")

    def delete() -> None:
        with kv.transaction(write=True) as txn:
            txn.delete(b"d/a")

    with pytest.raises(errors.TxnConflict):
        scanned_then(kv, delete)


def test_writes_outside_what_was_scanned_do_not_conflict(kv: EtcdKV) -> None:
    put(kv, b"d/a", b"1")
    put(kv, b"d/m", b"1")
    scanned_then(kv, lambda: put(kv, b"e/x", b"elsewhere"))
    # with limit=1 only [d/, d/a] was read: d/z is beyond it
    scanned_then(kv, lambda: put(kv, b"d/z", b"later"), limit=1)
    assert get(kv, b"result") == b"x"


def test_prefixes_keep_engines_apart(etcd: EtcdCluster, kv: EtcdKV) -> None:
    other = EtcdKV(etcd.endpoints, kv.prefix[:-1] + b"\xff")  # sorts right after kv's keys
    try:
        put(other, b"x", b"other")
        put(kv, b"\xff\xff", b"mine")
        with kv.transaction(write=False) as txn:
            assert list(txn.scan(b"")) == [(b"\xff\xff", b"mine")]
            assert txn.get(b"x") is None
        with pytest.raises(ValueError):
            put(kv, b"k" * 512, b"too long")
    finally:
        other.close()


class Lost(grpc.RpcError):
    """What gRPC raises when the connection breaks after a request went out."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "injected: Socket closed"


def lose_answers(kv: EtcdKV, monkeypatch: pytest.MonkeyPatch, applied: bool) -> list[str]:
    """Make the next commit fail like a dead connection, after reaching etcd or before."""
    client = kv._client
    real = client._send
    sent: list[str] = []

    def send(index: int, method: str, request: Any) -> Any:
        sent.append(method)
        if method == "Txn" and sent.count(method) == 1:
            if applied:
                real(index, method, request)
            raise Lost()
        return real(index, method, request)

    monkeypatch.setattr(client, "_send", send)
    return sent


@pytest.mark.parametrize("applied", [True, False])
def test_a_commit_whose_answer_is_lost_succeeds_once(
    kv: EtcdKV, monkeypatch: pytest.MonkeyPatch, applied: bool
) -> None:
    sent = lose_answers(kv, monkeypatch, applied)
    with kv.transaction(write=True) as txn:  # a create: fails if applied twice
        assert txn.get(b"new") is None
        txn.put(b"new", b"v")
    assert sent.count("Txn") == 2
    assert get(kv, b"new") == b"v"


def test_a_lost_answer_of_an_applied_commit_is_not_run_again_after_its_keys_change(
    kv: EtcdKV, etcd: EtcdCluster, etcd_prefix: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit was applied, its answer lost, and another client changed a key it wrote
    before the resend: the resend finds it applied (its marker), so the body is not run a
    second time on what the other client left (the etcd failover test saw a removal
    applied twice that way)."""
    other = EtcdKV(etcd.endpoints, etcd_prefix)
    with kv.transaction(write=True) as txn:
        txn.put(b"count", b"1")
    client = kv._client
    real = client._send
    sent: list[str] = []

    def send(index: int, method: str, request: Any) -> Any:
        sent.append(method)
        if method == "Txn" and sent.count(method) == 1:  # the commit
            real(index, method, request)
            with other.transaction(write=True) as txn:
                txn.put(b"count", b"other")
            raise Lost()
        return real(index, method, request)

    monkeypatch.setattr(client, "_send", send)
    runs = []

    def bump(txn: Any) -> None:
        runs.append(txn.get(b"count"))
        txn.put(b"count", b"2")
        txn.put(b"bumped", b"yes")

    write_txn(kv, bump)
    assert runs == [b"1"], runs  # run once: the resend knew it had been applied
    assert get(kv, b"count") == b"other"
    with kv.transaction(write=False) as txn:  # the markers stay out of every scan
        assert [k for k, _ in txn.scan(b"")] == [b"bumped", b"count"]
    other.close()


def lagging_member(kv: EtcdKV, monkeypatch: pytest.MonkeyPatch, at: int) -> list[bool]:
    """Answer every read a member serves alone (serializable) that would start a snapshot
    as of revision ``at``, as a member that is behind would; the first-read kinds
    (serializable or not) in order."""
    client = kv._client
    real = client._send
    firsts: list[bool] = []

    def send(index: int, method: str, request: Any) -> Any:
        reads = [request] if method == "Range" else [op.request_range for op in request.success]
        for read in reads:
            if not read.revision and read.key:  # a first read (not a commit's ops)
                firsts.append(read.serializable)
                if read.serializable:
                    read.revision = at
        return real(index, method, request)

    monkeypatch.setattr(client, "_send", send)
    return firsts


def test_write_transactions_read_locally_and_an_error_of_a_stale_read_is_not_final(
    kv: EtcdKV, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create that finds its name taken on a member still behind a removal is run
    again through the leader, not answered EEXIST; so is a result read there."""
    with kv.transaction(write=True) as txn:
        txn.put(b"name", b"old")
    with kv.transaction(write=True) as txn:
        txn.put(b"other", b"x")
    before = kv.range(pb.RangeRequest(key=kv.prefix + b"name")).header.revision
    with kv.transaction(write=True) as txn:
        txn.delete(b"name")
        txn.put(b"other", b"y")
    firsts = lagging_member(kv, monkeypatch, before)

    def create(txn: Any) -> None:
        if txn.get(b"name") is not None:
            raise errors.AlreadyExists("name")
        txn.put(b"name", b"new")

    write_txn(kv, create)
    assert firsts == [True, False]  # local, then through the leader after the conflict
    assert write_txn(kv, lambda txn: txn.get(b"other")) == b"y"
    assert firsts[2:] == [True, False]
    assert get(kv, b"name") == b"new"
    with kv.transaction(write=False) as txn:  # a read-only transaction asks the leader
        txn.get(b"name")
    assert firsts[-1] is False


def test_reads_at_the_snapshot_from_a_member_behind_it_go_through_the_leader(
    kv: EtcdKV, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a failover, the member asked may not have applied the snapshot yet: a batch
    read served by it fails as a future revision and is read again through the leader."""
    put(kv, b"a", b"1")
    put(kv, b"b", b"2")
    real = kv.txn
    refused: list[bool] = []

    def txn(request: pb.TxnRequest, *, idempotent: bool = True) -> pb.TxnResponse:
        reads = [op.request_range for op in request.success if op.HasField("request_range")]
        if reads and reads[0].revision and reads[0].serializable and not refused:
            refused.append(True)
            raise EtcdError(
                grpc.StatusCode.OUT_OF_RANGE,
                "etcdserver: mvcc: required revision is a future revision",
            )
        return real(request, idempotent=idempotent)

    monkeypatch.setattr(kv, "txn", txn)
    for write in (False, True):
        refused.clear()
        with kv.transaction(write=write) as t:
            assert t.get(b"a") == b"1"  # the snapshot
            assert t.get_many([b"b"]) == [b"2"]  # at it: refused once, then through the leader
        assert refused == [True]


def test_a_snapshot_compacted_away_is_a_conflict(kv: EtcdKV) -> None:
    put(kv, b"a", b"1")
    with pytest.raises(errors.TxnConflict), kv.transaction(write=False) as txn:
        txn.get(b"a")  # the snapshot
        put(kv, b"b", b"2")
        latest = kv.range(pb.RangeRequest(key=b"-")).header.revision
        kv.call("Compact", pb.CompactionRequest(revision=latest, physical=True))
        txn.get(b"b")


def test_a_dead_endpoint_is_skipped(etcd: EtcdCluster, etcd_prefix: bytes) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    kv = EtcdKV([dead, *etcd.endpoints], etcd_prefix, timeout=2)
    try:
        put(kv, b"k", b"v")
        assert get(kv, b"k") == b"v"
    finally:
        kv.close()
    nobody = EtcdKV([dead], etcd_prefix, timeout=1, retry_for=0.5)
    with pytest.raises(errors.RemoteIOError, match="unreachable"):
        get(nobody, b"k")


def test_open_engine_uri(etcd: EtcdCluster) -> None:
    hosts = ",".join(e.removeprefix("http://") for e in etcd.endpoints)
    engine = open_engine(f"etcd://{hosts}/vol%2Fa/")
    assert engine.prefix == b"vol/a/"
    assert open_engine(f"etcd://{hosts}").prefix == b"cloudfs/"
    with pytest.raises(errors.UsageError):
        open_engine("etcd:///nohost")
    with pytest.raises(errors.StartupError, match="cannot reach etcd"):
        open_engine(f"etcd://127.0.0.1:{free_port()}", timeout=0.5, retry_for=0.5)


def test_a_transaction_over_the_server_limit_fails_whole(kv: EtcdKV) -> None:
    with (
        pytest.raises(errors.RemoteIOError, match="max-txn-ops"),
        kv.transaction(write=True) as txn,
    ):
        for i in range(65_537):  # testkit/etcd.py: --max-txn-ops=65536
            txn.put(b"many/%06d" % i, b"")
    with kv.transaction(write=False) as txn:
        assert list(txn.scan(b"many/", limit=1)) == []


@pytest.fixture
def big_dir(etcd: EtcdCluster, tmp_path: Path) -> Iterator[tuple[MetaWorld, InodeId]]:
    """A tree over etcd whose directory "big" holds 10,000 objects, not listed yet."""
    world = make_world("etcd-kv", str(tmp_path), etcd.endpoints)
    for i in range(10_000):
        world.store.put_bytes(f"big/{i:05d}.jpg", b"x")
    yield world, world.meta.lookup(ROOT_INODE, b"big").inode
    world.meta.close()


def test_a_10000_entry_listing_merges_in_one_commit(big_dir: tuple[MetaWorld, InodeId]) -> None:
    """20,000 puts, 2.5 MB: over etcd's defaults, within testkit/etcd.py's limits."""
    world, big = big_dir
    first = world.meta.readdir(big, None, 100)  # lists and merges the directory
    assert [e.name for e in first] == [b"%05d.jpg" % i for i in range(100)]
    last = world.meta.readdir(big, b"09899.jpg", 1000)
    assert [e.name for e in last] == [b"%05d.jpg" % i for i in range(9900, 10_000)]


def test_refreshing_a_10000_entry_directory(
    big_dir: tuple[MetaWorld, InodeId], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh reads every entry's record, 128 to a round trip (it took one each, 14 s
    here), and commits ~20,000 compares."""
    world, big = big_dir
    world.meta.readdir(big, None, 1)
    world.store.put_bytes("big/new.jpg", b"y")
    world.expire()
    calls = count_calls(monkeypatch)
    assert world.meta.lookup(big, b"new.jpg").size == 1
    assert len(calls) < 200  # 10,000 records: 79 reads of 128; pages of the scans
    assert world.meta.getattr(big).nlink == 2


def test_round_trips_per_change_over_etcd(
    etcd: EtcdCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each change's etcd calls, counted so that a regression shows: a create is a read
    and a commit; an unlink and a rename of an uploaded file plan (reads, the
    reservations' commit), move in the UFS and commit. Both directories' listings are
    checked in the plan's own reads or in one read before it, not one read each."""
    world = make_world("etcd-kv", str(tmp_path), etcd.endpoints)
    try:
        meta = world.meta
        top = meta.mkdir(ROOT_INODE, b"top", 0o040755, 0, 0).inode
        for name in (b"a", b"b"):
            attr, _ = meta.create_open(top, name, 0o644, 0, 0)
            world.upload(attr.inode, b"x")
            meta.release(attr.inode)
        calls = count_calls(monkeypatch)
        meta.create(top, b"c", 0o100644, 0, 0)
        assert len(calls) == 2, calls
        calls.clear()
        meta.rename(top, b"a", top, b"r")
        assert len(calls) == 6, calls  # was 8: a read of each directory and of the target
        calls.clear()
        meta.unlink(top, b"b")
        assert len(calls) == 7, calls  # was 8: the directory's listing checked in the plan
    finally:
        world.meta.close()


def count_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The etcd calls made from now on (their method names), by every engine."""
    calls: list[str] = []
    real = EtcdClient._send

    def send(client: EtcdClient, index: int, method: str, request: Any) -> Any:
        calls.append(method)
        return real(client, index, method, request)

    monkeypatch.setattr(EtcdClient, "_send", send)
    return calls


def leader_of(cluster: EtcdCluster) -> int:
    for index, member in enumerate(cluster.members):
        request = urllib.request.Request(
            f"{member.client_url}/v3/maintenance/status", data=b"{}", method="POST"
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            status = json.loads(resp.read())
        if status["leader"] == status["header"]["member_id"]:
            return index
    raise AssertionError("no leader")


def test_three_members_keep_serving_when_the_leader_dies(tmp_path: Path) -> None:
    binary = require_etcd()
    with running_etcd(tmp_path, members=3, binary=binary) as cluster:
        kv = EtcdKV(cluster.endpoints, b"ha/", timeout=2, retry_for=15)
        try:
            put(kv, b"before", b"1")
            leader = leader_of(cluster)
            cluster.members[leader].kill()
            start = time.monotonic()
            put(kv, b"after", b"2")  # needs a new leader
            write_txn(kv, lambda txn: txn.put(b"n", (txn.get(b"before") or b"") + b"!"))
            assert get(kv, b"before") == b"1" and get(kv, b"after") == b"2"
            assert get(kv, b"n") == b"1!"
            assert time.monotonic() - start < 15
        finally:
            kv.close()
