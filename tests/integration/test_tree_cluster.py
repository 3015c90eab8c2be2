"""Several tree servers on one etcd cluster: concurrency, invariants, failures.

Real processes throughout: a 3-member etcd cluster on loopback
(``testkit/etcd.py``), two ``cloudfs meta serve --engine
etcd://h1,h2,h3/prefix`` servers on it, client processes speaking gRPC
(``testkit/stress_client.py``) half to each server, and FUSE mounts
through a server. After each run, ``testkit/tree_check.py`` walks the
volume through the API and reads its keys in etcd, and every invariant of the
tree must hold. The checker itself is tested first, on trees broken on
purpose.

Failures: etcd members killed while clients work (a follower, then the
leader), a tree server SIGKILLed and restarted on its port, and every etcd
member stopped (a call then answers EIO within a bounded time, never hangs).
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from cloudfs.errors import FsError
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.client.tree_uri import parse_tree_uri
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine import codec
from cloudfs.meta.engine.kv_etcd import EtcdKV, open_engine
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.types import ROOT_INODE, Attr, DirEntry, InodeId
from testkit.etcd import EtcdCluster, require_etcd, running_etcd
from testkit.memory_store import MemoryObjectStore
from testkit.mounts import Backing, mounted, world_traversable_tmpdir
from testkit.stress_client import (
    DIR,
    FILE,
    Job,
    Outcome,
    context,
    create_race,
    lookup_loop,
    make_and_look,
    mix,
    refresh_loop,
    rename_over,
    run_clients,
)
from testkit.tree_check import TreeReport, check_tree, tree_kv, volume_tree_id
from testkit.tree_server import TreeServer, running_tree_server

R = InodeId(ROOT_INODE)
EIO_BOUND = 30.0  # seconds within which a call must fail when the service cannot answer
RECONNECT_GRACE = 10.0  # seconds after a tree server's restart during which its clients
# may still get EIO (calls started while it was down, gRPC's reconnect back-off)


# -- the checker, on trees broken on purpose ---------------------------------------


@dataclass
class LocalTree:
    meta: EmbeddedMeta
    kv: MemoryKV
    inodes: dict[str, InodeId]

    def rec(self, ino: int) -> codec.InodeRecord:
        with self.kv.transaction(write=False) as txn:
            data = txn.get(codec.inode_key(ino))
        assert data is not None
        return codec.decode_inode(data)

    def put(self, key: bytes, value: bytes) -> None:
        with self.kv.transaction(write=True) as txn:
            txn.put(key, value)

    def delete(self, key: bytes) -> None:
        with self.kv.transaction(write=True) as txn:
            txn.delete(key)

    def save(self, ino: int, rec: codec.InodeRecord) -> None:
        self.put(codec.inode_key(ino), codec.encode_inode(rec))


@pytest.fixture
def local_tree() -> Iterator[LocalTree]:
    """A sound tree of every kind of inode, over a memory KV: d/e/f, hard links, a
    symlink, an xattr, and an unlinked file still open (an orphan)."""
    kv = MemoryKV()
    meta = EmbeddedMeta(kv, MemoryObjectStore(), ttl=3600, shared=True)
    d = meta.mkdir(R, b"d", DIR, 0, 0).inode
    e = meta.mkdir(d, b"e", DIR, 0, 0).inode
    f = meta.create(e, b"f", FILE, 0, 0).inode
    meta.link(f, R, b"f-link")
    meta.link(f, d, b"f-link2")
    g = meta.create(R, b"g", FILE, 0, 0).inode
    meta.setxattr(g, b"user.k", b"v")
    s = meta.symlink(d, b"s", b"../g", 0, 0).inode
    held = meta.create(R, b"held", FILE, 0, 0).inode
    meta.open(held, "sess1")
    meta.unlink(R, b"held")
    yield LocalTree(meta, kv, {"d": d, "e": e, "f": f, "g": g, "s": s, "held": held})
    meta.close()


def test_the_checker_passes_a_sound_tree(local_tree: LocalTree) -> None:
    report = check_tree(local_tree.meta, local_tree.kv)
    assert report.orphans == {local_tree.inodes["held"]}
    assert len(report.inodes) == 6 and report.directories == 3  # root, d, e; f, g, s
    assert report.records == 7  # and the orphan
    assert report.kv_entries == report.entries and len(report.entries) == 7
    local_tree.meta.release(local_tree.inodes["held"], "sess1")  # the orphan goes
    assert check_tree(local_tree.meta, local_tree.kv).orphans == set()


class Distorting:
    """A Meta whose readdir or lookup lies (what the keys alone cannot show)."""

    def __init__(self, meta: EmbeddedMeta, readdir_dup: bool = False) -> None:
        self.meta = meta
        self.readdir_dup = readdir_dup

    def getattr(self, inode: InodeId) -> Attr:
        return self.meta.getattr(inode)

    def lookup(self, parent: InodeId, name: bytes) -> Attr:
        attr = self.meta.lookup(parent, name)
        if not self.readdir_dup and name == b"g":
            return replace(attr, inode=InodeId(attr.inode + 1000))
        return attr

    def readdir(self, inode: InodeId, after: bytes | None, limit: int) -> list[DirEntry]:
        page = self.meta.readdir(inode, after, limit)
        if self.readdir_dup and page and inode == R:
            page.insert(1, page[0])
        return page


def _break_file_nlink(t: LocalTree) -> None:
    f = t.inodes["f"]
    t.save(f, replace(t.rec(f), nlink=2))


def _break_dir_nlink(t: LocalTree) -> None:
    d = t.inodes["d"]
    t.save(d, replace(t.rec(d), nlink=2))


def _unnamed_record(t: LocalTree) -> None:  # a record no entry names, not open
    t.delete(codec.dentry_key(R, b"g"))
    t.save(R, replace(t.rec(R), mtime_ns=1))


def _orphan_not_held(t: LocalTree) -> None:
    t.delete(codec.open_key(t.inodes["held"]))
    for key in _keys(t, b"Q"):
        t.delete(key)


def _dangling_dentry(t: LocalTree) -> None:
    t.put(codec.dentry_key(t.inodes["e"], b"ghost"), codec.u64(999))


def _wrong_parent(t: LocalTree) -> None:
    g = t.inodes["g"]
    t.save(g, replace(t.rec(g), parent=t.inodes["d"]))


def _directory_with_two_names(t: LocalTree) -> None:
    e = t.inodes["e"]
    t.put(codec.dentry_key(R, b"e-again"), codec.u64(e))
    t.save(R, replace(t.rec(R), nlink=t.rec(R).nlink + 1))


def _cycle(t: LocalTree) -> None:  # d moved below its own child e, detached from the root
    d, e = t.inodes["d"], t.inodes["e"]
    t.delete(codec.dentry_key(R, b"d"))
    t.put(codec.dentry_key(e, b"d"), codec.u64(d))
    t.save(d, replace(t.rec(d), parent=e))


def _missing_link_key(t: LocalTree) -> None:
    for key in _keys(t, codec.link_prefix(t.inodes["f"])):
        t.delete(key)


def _stale_xattr(t: LocalTree) -> None:
    t.put(codec.xattr_key(777, b"user.k"), b"v")


def _counter_off(t: LocalTree) -> None:
    t.put(codec.count_shard_key(7), (40).to_bytes(8, "big", signed=True))


def _keys(t: LocalTree, prefix: bytes) -> list[bytes]:
    with t.kv.transaction(write=False) as txn:
        return [k for k, _ in txn.scan(prefix)]


BREAKAGES: dict[str, tuple[Callable[[LocalTree], None], str]] = {
    "file-nlink": (_break_file_nlink, "nlink 2, names 3"),
    "dir-nlink": (_break_dir_nlink, "nlink 2, 2 + subdirectories 3"),
    "unnamed-record": (_unnamed_record, "not reachable from the root"),
    "orphan-not-held": (_orphan_not_held, "orphan (nlink 0) that nobody holds open"),
    "dangling-dentry": (_dangling_dentry, "names inode 999, which has no record"),
    "wrong-parent": (_wrong_parent, "is no dentry"),
    "directory-link": (_directory_with_two_names, "second name"),
    "cycle": (_cycle, "not reachable from the root"),
    "missing-link-key": (_missing_link_key, "secondary links set()"),
    "stale-xattr": (_stale_xattr, "X key of inode 777"),
    "counter": (_counter_off, "the inode counter says"),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_the_checker_catches_a_broken_tree(local_tree: LocalTree, breakage: str) -> None:
    corrupt, expected = BREAKAGES[breakage]
    corrupt(local_tree)
    with pytest.raises(AssertionError, match="tree check") as caught:
        check_tree(local_tree.meta, local_tree.kv)
    assert expected in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    ("readdir_dup", "expected"),
    [(True, "listed twice"), (False, "looked up as")],
    ids=["same-name-twice", "readdir-lookup-disagree"],
)
def test_the_checker_catches_an_api_that_disagrees(
    local_tree: LocalTree, readdir_dup: bool, expected: str
) -> None:
    with pytest.raises(AssertionError, match=expected):
        check_tree(Distorting(local_tree.meta, readdir_dup), local_tree.kv, page=3)


# -- the cluster --------------------------------------------------------------------


@dataclass
class Cluster:
    etcd: EtcdCluster
    engine_uri: str
    servers: tuple[TreeServer, TreeServer]
    kv: EtcdKV  # the checker's own view of the keys
    logs: Path

    def new_volume(self, data: Path, **options: object) -> Volume:
        """A volume created through server 1; both servers must know it."""
        uri = self.servers[0].new_volume(f"file://{data}", **options)
        name = parse_tree_uri(uri).volume
        client = VolumeClient(self.servers[1].address, timeout=30)
        try:
            assert client.get(name).ufs_uri == f"file://{data}"
        finally:
            client.close()
        return Volume(self, name, volume_tree_id(self.kv, name), data)

    def restore(self) -> None:
        """Every etcd member and tree server running again (after a test killed some)."""
        for m in self.etcd.members:
            m.start()
        self.etcd.wait_healthy()
        for s in self.servers:
            if not s.alive:
                s.restart()

    def server_log(self) -> str:
        return "\n".join(
            f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-30:])
            for p in sorted(self.logs.glob("server*.log"))
        )


@dataclass
class Volume:
    cluster: Cluster
    name: str
    tree_id: str
    data: Path

    def uri(self, server: int) -> str:
        return f"grpc://{self.cluster.servers[server].address}/{self.name}"

    def meta(self, server: int, timeout: float = 30.0, **options: float) -> GrpcMeta:
        address = self.cluster.servers[server].address
        return GrpcMeta(address, self.name, timeout=timeout, listing_timeout=timeout, **options)

    def check(self, server: int = 1) -> TreeReport:
        """Every invariant, through ``server``'s API and the keys in etcd."""
        meta = self.meta(server)
        try:
            return check_tree(meta, tree_kv(self.cluster.kv, self.tree_id))
        finally:
            meta.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A 3-member etcd cluster and two tree servers on it (one volume prefix per run)."""
    binary = require_etcd()
    tmp = tmp_path_factory.mktemp("tree-cluster")
    with running_etcd(tmp, members=3, binary=binary) as etcd:
        hosts = ",".join(e.removeprefix("http://") for e in etcd.endpoints)
        engine = f"etcd://{hosts}/cluster-{uuid.uuid4().hex[:8]}"
        with (
            running_tree_server(engine, log_path=tmp / "server1.log") as first,
            running_tree_server(engine, log_path=tmp / "server2.log") as second,
        ):
            kv = open_engine(engine, timeout=5, retry_for=30)
            try:
                yield Cluster(etcd, engine, (first, second), kv, tmp)
            finally:
                kv.close()


@pytest.fixture
def volume(request: pytest.FixtureRequest, cluster: Cluster) -> Iterator[Volume]:
    """A new volume over a new local directory, its root listed already.

    The listing TTL is an hour unless an indirect parametrization gives
    ``VolumeSpec`` options: no UFS listing is merged while clients work (new
    directories start fresh); listings merged while clients work are tested on
    their own below.
    """
    cluster.restore()
    options: dict[str, object] = {"meta_ttl": 3600, **getattr(request, "param", {})}
    data = world_traversable_tmpdir("cloudfs-cluster-ufs-")
    try:
        vol = cluster.new_volume(data, **options)
        meta = vol.meta(0)
        try:
            meta.readdir(R, None, 1)  # lists the root once, before any client runs
        finally:
            meta.close()
        yield vol
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _summary(outcomes: list[Outcome]) -> str:
    total: Counter[str] = Counter()
    for o in outcomes:
        total.update(o.counts)
    return ", ".join(f"{k}={v}" for k, v in sorted(total.items()))


def _unexpected(outcomes: list[Outcome]) -> list[str]:
    return [f"{o.name}: {code} at {t:.1f}: {msg}" for o in outcomes for code, t, msg in o.errors]


def test_a_volume_made_through_one_server_is_served_by_both(volume: Volume) -> None:
    one, two = volume.meta(0), volume.meta(1)
    try:
        d = one.mkdir(R, b"dir", DIR, 0, 0).inode
        f = two.create(d, b"file", FILE, 0, 0).inode
        assert one.lookup(d, b"file").inode == f
        assert [e.name for e in two.readdir(R, None, 10)] == [b"dir"]
        with pytest.raises(FsError) as caught:
            two.mkdir(R, b"dir", DIR, 0, 0)
        assert caught.value.errno == errno.EEXIST
    finally:
        one.close()
        two.close()
    report = volume.check()
    assert len(report.inodes) == 3 and report.records == 3


# -- concurrency ----------------------------------------------------------------------


def test_a_random_mix_from_six_clients_on_two_servers_keeps_the_tree_sound(
    volume: Volume,
) -> None:
    jobs = [
        Job(mix, (volume.cluster.servers[i % 2].address, volume.name, str(i), 1000 + i, 10.0))
        for i in range(6)
    ]
    outcomes = run_clients(jobs, timeout=90)
    summary = _summary(outcomes)
    assert not _unexpected(outcomes), "\n".join(_unexpected(outcomes)) + "\n" + summary
    for op in ("create", "mkdir", "rename", "link", "unlink", "rmdir", "setattr", "open"):
        assert sum(o.ok(op) for o in outcomes) > 0, f"no {op} ever succeeded: {summary}"
    assert sum(o.counts["rename-into-self:EINVAL"] for o in outcomes) >= 6 * 3, summary
    assert sum(o.counts["create:EEXIST"] + o.counts["mkdir:EEXIST"] for o in outcomes) > 0
    report = volume.check()
    assert report.orphans == set(), "every client released what it opened"
    print(f"mix: {summary}; tree: {report.summary()}")


def test_many_creators_of_one_name_exactly_one_wins(volume: Volume) -> None:
    racers = 6
    names = [(b"file-%d" % i, False) for i in range(6)] + [(b"dir-%d" % i, True) for i in range(4)]
    barrier = context().Barrier(racers)
    servers = volume.cluster.servers
    jobs = [
        Job(create_race, (servers[i % 2].address, volume.name, str(i), names, barrier))
        for i in range(racers)
    ]
    outcomes = run_clients(jobs, timeout=120)
    for index, (name, _) in enumerate(names):
        results = Counter(o.extra["results"][index] for o in outcomes)
        assert results == {"ok": 1, "EEXIST": racers - 1}, (name, results)
    report = volume.check()
    assert len(report.entries) == len(names)


def test_a_name_renamed_over_again_and_again_never_disappears(volume: Volume) -> None:
    one = volume.meta(0)
    try:
        one.create(R, b"target", FILE, 0, 0)
        one.mkdir(R, b"target-dir", DIR, 0, 0)
    finally:
        one.close()
    s = [srv.address for srv in volume.cluster.servers]
    targets = [b"target", b"target-dir"]
    duration = 6.0
    jobs = [
        Job(rename_over, (s[0], volume.name, "f1", b"target", duration, False)),
        Job(rename_over, (s[1], volume.name, "f2", b"target", duration, False)),
        Job(rename_over, (s[0], volume.name, "d1", b"target-dir", duration, True)),
        Job(lookup_loop, (s[1], volume.name, "r2", targets, duration)),
        Job(lookup_loop, (s[0], volume.name, "r1", targets, duration)),
        Job(lookup_loop, (s[1], volume.name, "r3", targets, duration)),
    ]
    outcomes = run_clients(jobs, timeout=90)
    summary = _summary(outcomes)
    assert not _unexpected(outcomes), "\n".join(_unexpected(outcomes)) + "\n" + summary
    renames = sum(o.ok("rename") for o in outcomes)
    lookups = sum(o.ok("lookup") for o in outcomes)
    assert renames >= 10 and lookups >= 10, summary
    readers = [o for o in outcomes if o.name.startswith("reader")]
    assert any(o.extra["inodes_seen"] > 2 for o in readers), "the readers saw the renames"
    report = volume.check()
    assert {n for p, n, _ in report.entries if p == R} == set(targets)
    print(f"renames: {renames}, lookups: {lookups}; {summary}")


@pytest.mark.parametrize(
    ("volume", "maker_servers"),
    [({"meta_ttl": 0.5}, (0, 0)), ({"meta_ttl": 0.5}, (1, 0))],
    indirect=["volume"],
    ids=["one-server", "two-servers"],
)
def test_a_listing_merged_meanwhile_keeps_a_directory_just_made(
    volume: Volume, maker_servers: tuple[int, int]
) -> None:
    """Makers mkdir, look up and rmdir names of their own through ``maker_servers``;
    refreshers look up a missing name through the same servers, so the root (TTL 0.5 s)
    is listed and merged again and again meanwhile. No made name may vanish."""
    for i in range(100):  # a root worth listing: the listing takes a while
        (volume.data / f"obj-{i:03d}").write_bytes(b"x")
    s = [srv.address for srv in volume.cluster.servers]
    duration = 4.0
    jobs = [
        Job(make_and_look, (s[maker_servers[0]], volume.name, "m1", duration, True)),
        Job(make_and_look, (s[maker_servers[1]], volume.name, "m0", duration, True)),
        Job(refresh_loop, (s[0], volume.name, "r0", duration)),
        Job(refresh_loop, (s[maker_servers[0]], volume.name, "r1", duration)),
    ]
    outcomes = run_clients(jobs, timeout=90)
    summary = _summary(outcomes)
    print(f"listing race: {summary}")
    assert sum(o.ok("make") for o in outcomes) >= 5, summary
    assert not _unexpected(outcomes), "\n".join(_unexpected(outcomes)) + "\n" + summary
    volume.check()


# -- failures ---------------------------------------------------------------------------


def _first_success_after(outcomes: list[Outcome], t: float) -> float | None:
    after = [s for o in outcomes for s in o.successes if s > t]
    return min(after) - t if after else None


def test_clients_keep_working_while_etcd_loses_a_follower_then_the_leader(
    volume: Volume,
) -> None:
    cluster = volume.cluster
    etcd = cluster.etcd
    events: dict[str, float] = {}

    def chaos() -> None:
        time.sleep(3.0)  # the clients are at work
        leader = etcd.leader_index()
        follower = next(i for i in range(3) if i != leader)
        events["follower killed"] = time.time()
        etcd.members[follower].kill()
        time.sleep(2.0)
        etcd.members[follower].start()
        etcd.wait_healthy(timeout=20)
        events["follower back"] = time.time()
        leader = etcd.leader_index()
        events["leader killed"] = time.time()
        etcd.members[leader].kill()
        time.sleep(3.0)
        etcd.members[leader].start()
        etcd.wait_healthy(timeout=20)
        events["leader back"] = time.time()

    servers = cluster.servers
    jobs = [
        Job(mix, (servers[i % 2].address, volume.name, f"e{i}", 2000 + i, 13.0)) for i in range(4)
    ]
    outcomes = run_clients(jobs, timeout=120, during=chaos)
    summary = _summary(outcomes)
    slow = sorted((round(t, 1), op, round(s - events["follower killed"], 1))
                  for o in outcomes for op, s, t in o.slow)  # fmt: skip
    print(f"etcd failover: {summary}; slow calls (seconds, op, at): {slow}")
    assert not _unexpected(outcomes), "\n".join(_unexpected(outcomes)) + "\n" + summary
    for event in ("follower killed", "leader killed"):
        resumed = _first_success_after(outcomes, events[event])
        assert resumed is not None and resumed < 10, (event, resumed, slow)
    assert max(o.max_latency for o in outcomes) < 15, slow
    volume.check()


def _timed_error(call: Callable[[], object]) -> tuple[float, int | None]:
    """How long ``call`` took to fail, and its errno (None: it did not fail)."""
    start = time.monotonic()
    try:
        call()
    except FsError as exc:
        return time.monotonic() - start, exc.errno
    except OSError as exc:
        return time.monotonic() - start, exc.errno
    return time.monotonic() - start, None


def _require_fuse() -> None:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("needs /dev/fuse and root for a real mount")


def test_a_killed_tree_server_restarted_on_its_port_is_picked_up(volume: Volume) -> None:
    _require_fuse()
    cluster = volume.cluster
    first = cluster.servers[0]
    backing = Backing(uri=volume.uri(0), local_dir=volume.data)
    timings: dict[str, float] = {}
    with mounted(backing, ["--meta-ttl", "1"]) as mount:
        (mount.root / "before").mkdir()
        (mount.root / "before" / "f").write_bytes(b"written before the crash")
        client = volume.meta(0, timeout=10, reconnect=2.0)
        events: dict[str, float] = {}

        def crash_and_restart() -> None:
            time.sleep(3.5)  # the clients are at work
            events["killed"] = time.time()
            first.kill()
            # the dead server: a client call and a syscall of the mount fail, in bounded time
            took, code = _timed_error(lambda: client.getattr(R))
            timings["client call, server dead"] = took
            assert code == errno.EIO, code
            took, code = _timed_error(lambda: os.stat(mount.root / "never-seen"))
            timings["mount stat, server dead"] = took
            assert code == errno.EIO, code
            events["restarting"] = time.time()
            first.restart()
            events["restarted"] = time.time()

        s = cluster.servers
        jobs = [
            # long enough to outlast the dead time: the mount's stat waits out its
            # reconnect window (RECONNECT_SECONDS) before EIO
            Job(mix, (s[i % 2].address, volume.name, f"k{i}", 3000 + i, 35.0))
            for i in range(4)
        ]
        outcomes = run_clients(jobs, timeout=180, during=crash_and_restart)
        # the same client and the same mount carry on through the restarted server
        assert client.getattr(R).is_dir
        client.close()
        assert (mount.root / "before" / "f").read_bytes() == b"written before the crash"
        (mount.root / "after").mkdir()
        (mount.root / "after" / "g").write_bytes(b"written after the restart")
        assert sorted(os.listdir(mount.root / "after")) == ["g"]
        assert (mount.root / "after" / "g").read_bytes() == b"written after the restart"
        # through the other server too
        other = volume.meta(1)
        try:
            assert other.lookup(other.lookup(R, b"after").inode, b"g").size == 25
        finally:
            other.close()
    summary = _summary(outcomes)
    slow = sorted((round(t, 1), o.name, op, round(st - events["killed"], 1))
                  for o in outcomes for op, st, t in o.slow)  # fmt: skip
    errors = sorted(
        (round(t - events["restarted"], 1), o.name, code, msg[:60])
        for o in outcomes
        for code, t, msg in o.errors
    )
    print(f"server crash: {timings}; {summary}; slow (s, client, op, at): {slow}")
    print(f"errors (seconds after the restart, client, errno, call): {errors}")
    for after_restart, name, code, msg in errors:
        # only a client of the dead server sees errors, EIO, and only until it is back
        # (RECONNECT_GRACE: gRPC's reconnect back-off, see the test after this one)
        assert name in ("mix-k0", "mix-k2") and code == "EIO", (name, code, msg)
        assert after_restart <= RECONNECT_GRACE, errors
    resumed = _first_success_after(
        [o for o in outcomes if o.name in ("mix-k0", "mix-k2")], events["restarted"]
    )
    assert resumed is not None and resumed < 35, resumed
    for name, took in timings.items():
        assert took < EIO_BOUND, (name, took)
    # the other server's clients: a pause at most as long as the lock of a dead holder lasts
    others = [o for o in outcomes if o.name in ("mix-k1", "mix-k3")]
    assert max(o.max_latency for o in others) < 35, slow
    volume.check(server=1)


def test_with_every_etcd_member_down_calls_fail_with_eio_in_bounded_time(
    volume: Volume,
) -> None:
    """Every etcd member killed: calls of a client and syscalls of a mount (through
    server 2) fail with EIO within EIO_BOUND, and all is well once etcd is back."""
    _require_fuse()
    cluster = volume.cluster
    backing = Backing(uri=volume.uri(1), local_dir=volume.data)
    timings: dict[str, tuple[float, int | None]] = {}
    messages: dict[str, str] = {}
    client_timeout = 16.0  # above the server's own bound (kv_etcd.DEFAULT_RETRY_FOR, 10 s)
    with mounted(backing, ["--meta-ttl", "1"]) as mount:
        (mount.root / "kept").write_bytes(b"kept")
        meta = volume.meta(1, timeout=client_timeout)
        try:
            for m in cluster.etcd.members:
                m.kill()
            calls: dict[str, Callable[[], object]] = {
                "client getattr": lambda: meta.getattr(R),
                "client lookup": lambda: meta.lookup(R, b"missing"),
                "client mkdir": lambda: meta.mkdir(R, b"new-dir", DIR, 0, 0),
                "mount stat": lambda: os.stat(mount.root / "never-seen"),
                "mount mkdir": lambda: os.mkdir(mount.root / "new-dir-2"),
            }

            def run(name: str, call: Callable[[], object]) -> None:
                start = time.monotonic()
                try:
                    call()
                    timings[name] = (time.monotonic() - start, None)
                except (FsError, OSError) as exc:
                    timings[name] = (time.monotonic() - start, exc.errno)
                    messages[name] = str(exc)

            threads = [threading.Thread(target=run, args=item) for item in calls.items()]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=EIO_BOUND + 30)
            print(f"etcd down: {timings}")
            assert set(timings) == set(calls), f"hung: {set(calls) - set(timings)}"
            for name, (took, code) in timings.items():
                assert code == errno.EIO and took < EIO_BOUND, (name, took, code)
        finally:
            for m in cluster.etcd.members:
                m.start()
        cluster.etcd.wait_healthy(timeout=30)
        deadline = time.monotonic() + 30
        while True:  # and the service comes back by itself
            try:
                meta.getattr(R)
                break
            except FsError:
                assert time.monotonic() < deadline, "the server did not recover"
                time.sleep(0.5)
        meta.close()
        assert (mount.root / "kept").read_bytes() == b"kept"
        (mount.root / "after").write_bytes(b"after")
        assert (mount.root / "after").read_bytes() == b"after"
    volume.check()
    # The client's calls must end with the server's own EIO answer (it gives up after
    # ~10 s), not with the client's deadline: a deadline here means the client re-sent
    # the call after the server's EIO.
    deadlined = {n: m for n, m in messages.items() if n.startswith("client") and "within" in m}
    assert not deadlined, f"the client re-sent a call the server had answered EIO: {deadlined}"
