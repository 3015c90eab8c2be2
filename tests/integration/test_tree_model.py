"""Model-based concurrency: three tree servers over one etcd, clients racing, the tree
checked against what each client's own calls imply.

Real processes: a 3-member etcd on loopback, three ``cloudfs meta serve`` on it,
six client processes (two per server) doing creates, renames (across
directories, and of their directories into each other's and into their own
subtrees) and unlinks, and racing for a few hot names
(``testkit/model_client.py``). Creates take no lock and the changes that
call the UFS reserve names (``cloudfs/meta/engine/reserve.py``), so this is
where a lost entry, a cycle or a name taken twice would show. Afterwards:

* every file a client's model holds is where the model says, and no other
  file is anywhere; every client directory has its model's parent;
* each hot name is held by at most one client, and exists exactly then;
* every invariant of ``testkit/tree_check.py`` holds (no cycle, nothing
  unreachable, counts right, no reservation left behind).
"""

from __future__ import annotations

import shutil
import stat
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.client.tree_uri import parse_tree_uri
from cloudfs.meta.engine.kv_etcd import open_engine
from cloudfs.types import ROOT_INODE, InodeId
from testkit.etcd import require_etcd, running_etcd
from testkit.model_client import modelled
from testkit.mounts import world_traversable_tmpdir
from testkit.stress_client import DIR, Job, run_clients
from testkit.tree_check import check_tree, tree_kv, volume_tree_id
from testkit.tree_server import TreeServer, running_tree_server

SERVERS = 3
CLIENTS = 6
SHARED = 3  # shared directories S0...
OPS = 120  # per client


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[TreeServer]]]:
    binary = require_etcd()
    tmp = tmp_path_factory.mktemp("tree-model")
    with running_etcd(tmp, members=3, binary=binary) as etcd:
        hosts = ",".join(e.removeprefix("http://") for e in etcd.endpoints)
        engine = f"etcd://{hosts}/model-{uuid.uuid4().hex[:8]}"
        with (
            running_tree_server(engine, log_path=tmp / "server0.log") as s0,
            running_tree_server(engine, log_path=tmp / "server1.log") as s1,
            running_tree_server(engine, log_path=tmp / "server2.log") as s2,
        ):
            yield engine, [s0, s1, s2]


def _set_up(meta: GrpcMeta) -> dict[str, int]:
    """The shared directories and each client's own (with a subdirectory): label -> inode."""
    dirs = {"root": ROOT_INODE}
    for i in range(SHARED):
        dirs[f"S{i}"] = meta.mkdir(InodeId(ROOT_INODE), f"S{i}".encode(), DIR, 0, 0).inode
    for i in range(CLIENTS):
        own = meta.mkdir(InodeId(ROOT_INODE), f"own-{i}".encode(), DIR, 0, 0).inode
        dirs[f"own-{i}"] = own
        dirs[f"own-{i}/sub"] = meta.mkdir(own, b"sub", DIR, 0, 0).inode
    return dirs


def _actual(meta: GrpcMeta, dirs: dict[str, int]) -> tuple[set[tuple[str, bytes]], dict[str, str]]:
    """Every (directory label, name) of a file, and each client directory's parent label."""
    label = {ino: name for name, ino in dirs.items()}
    files: set[tuple[str, bytes]] = set()
    parents: dict[str, str] = {}
    for where, ino in dirs.items():
        after = None
        while page := meta.readdir(InodeId(ino), after, 500):
            for entry in page:
                if stat.S_ISDIR(entry.attr.mode):
                    if entry.name.startswith(b"own-"):
                        parents[entry.name.decode()] = where
                    else:
                        assert label.get(entry.attr.inode) in (f"{where}/sub", entry.name.decode())
                else:
                    files.add((where, entry.name))
            after = page[-1].name
    return files, parents


def _expected(models: dict[str, dict[str, Any]]) -> set[tuple[str, bytes]]:
    """The files the models hold, hot names included (each held by one client at most)."""
    want = {loc for m in models.values() for loc in m["files"].values()}
    holders: dict[bytes, list[str]] = {}
    for tag, m in models.items():
        for name in m["hot"]:
            holders.setdefault(name, []).append(tag)
    assert all(len(h) == 1 for h in holders.values()), f"a hot name won twice: {holders}"
    return want | {("S0", name) for name in holders}


def test_racing_clients_on_three_servers_leave_the_tree_their_models_say(
    servers: tuple[str, list[TreeServer]],
) -> None:
    engine, trees = servers
    data = world_traversable_tmpdir("cloudfs-model-ufs-")
    try:
        uri = trees[0].new_volume(f"file://{data}", meta_ttl=3600)
        volume = parse_tree_uri(uri).volume
        meta = GrpcMeta(trees[1].address, volume, timeout=30, listing_timeout=30)
        try:
            dirs = _set_up(meta)
            jobs = [
                Job(modelled, (trees[i % SERVERS].address, volume, str(i), 7000 + i, dirs, OPS))
                for i in range(CLIENTS)
            ]
            outcomes = run_clients(jobs, timeout=240)
            errors = [f"{o.name}: {e}" for o in outcomes for e in o.errors]
            assert not errors, "\n".join(errors)
            models = {o.extra["tag"]: o.extra["model"] for o in outcomes}

            want_files = _expected(models)
            files, parents = _actual(meta, dirs)
            assert files == want_files, (
                f"missing: {sorted(want_files - files)}; unexpected: {sorted(files - want_files)}"
            )
            assert parents == {f"own-{t}": m["dir"] for t, m in models.items()}

            kv = open_engine(engine, timeout=5, retry_for=30)
            try:
                report = check_tree(meta, tree_kv(kv, volume_tree_id(kv, volume)))
            finally:
                kv.close()
            assert not report.problems, "\n".join(report.problems)
            moves = sum(o.ok("move-dir") for o in outcomes)
            into_itself = sum(o.counts["move-dir:EINVAL"] for o in outcomes)
            assert moves > 0 and into_itself > 0, (moves, into_itself)
            assert sum(o.counts["hot-create:EEXIST"] for o in outcomes) > 0
        finally:
            meta.close()
    finally:
        shutil.rmtree(data, ignore_errors=True)


def test_the_model_sees_a_lost_file(servers: tuple[str, list[TreeServer]]) -> None:
    """The check itself: a file removed behind the clients' backs is reported missing."""
    _, trees = servers
    data = world_traversable_tmpdir("cloudfs-model-ufs-")
    try:
        volume = parse_tree_uri(trees[0].new_volume(f"file://{data}", meta_ttl=3600)).volume
        meta = GrpcMeta(trees[2].address, volume, timeout=30, listing_timeout=30)
        try:
            dirs = _set_up(meta)
            out = modelled(trees[2].address, volume, "0", 1, dirs, 20)
            where, name = next(iter(out.extra["model"]["files"].values()))
            meta.unlink(InodeId(dirs[where]), name)
            files, _ = _actual(meta, dirs)
            assert _expected({"0": out.extra["model"]}) - files == {(where, name)}
        finally:
            meta.close()
    finally:
        shutil.rmtree(data, ignore_errors=True)
