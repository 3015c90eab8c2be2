"""The Meta protocol suite: EmbeddedMeta over every KV engine and UFS.

Runs on MemoryKV, LmdbKV and EtcdKV (a real etcd, ``testkit/etcd.py``)
over the in-memory store, and on LMDB over ``LocalObjectStore`` when that
module exists. UFS effects are checked by
looking at the store directly. Mirroring details that need call counts live in
``tests/unit/meta/test_mirroring.py``.
"""

from __future__ import annotations

import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cloudfs import errors
from cloudfs.meta.interface import XATTR_CREATE, XATTR_REPLACE
from cloudfs.types import ROOT_INODE, AttrChanges, InodeId
from testkit.meta_world import CONTRACT_WORLD_KINDS, TTL, MetaWorld, mkfile, open_world

R = ROOT_INODE


@pytest.fixture(params=CONTRACT_WORLD_KINDS)
def w(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetaWorld]:
    """The Meta suites' worlds, and EmbeddedMeta over etcd (skipped when not installed)."""
    yield from open_world(request, tmp_path)


# -- reading what the UFS holds ----------------------------------------------


def test_root(w: MetaWorld) -> None:
    attr = w.meta.getattr(R)
    assert attr.is_dir and stat.S_IMODE(attr.mode) == 0o755
    assert (attr.uid, attr.gid, attr.nlink) == (1000, 1000, 2)
    assert w.meta.object_key(R) == ""


def test_lookup_and_readdir_show_ufs_objects(w: MetaWorld) -> None:
    w.store.put_bytes("a.txt", b"hello")
    w.store.put_bytes("d/e/f.bin", b"12345678")
    a = w.meta.lookup(R, b"a.txt")
    assert a.is_reg and a.size == 5 and a.etag == w.store.head("a.txt").etag
    assert stat.S_IMODE(a.mode) == 0o644 and (a.uid, a.gid, a.nlink) == (1000, 1000, 1)
    d = w.meta.lookup(R, b"d")
    assert d.is_dir and stat.S_IMODE(d.mode) == 0o755
    e = w.meta.lookup(d.inode, b"e")
    f = w.meta.lookup(e.inode, b"f.bin")
    assert f.size == 8
    assert w.meta.object_key(f.inode) == "d/e/f.bin"
    names = [(x.name, x.attr.inode) for x in w.meta.readdir(R, None, 100)]
    assert names == [(b"a.txt", a.inode), (b"d", d.inode)]
    assert w.meta.getattr(R).nlink == 3 and w.meta.getattr(d.inode).nlink == 3
    with pytest.raises(errors.NotFound):
        w.meta.lookup(R, b"nope")
    with pytest.raises(errors.NotADirectory):
        w.meta.lookup(a.inode, b"x")
    with pytest.raises(errors.NotADirectory):
        w.meta.readdir(a.inode, None, 10)
    with pytest.raises(errors.NotFound):
        w.meta.getattr(InodeId(99999))


def test_readdir_pages_in_name_order(w: MetaWorld) -> None:
    for i in range(25):
        w.store.put_bytes(f"p/{i:03d}", b"")
    p = w.meta.lookup(R, b"p").inode
    seen: list[bytes] = []
    after: bytes | None = None
    while page := w.meta.readdir(p, after, 7):
        assert len(page) <= 7
        seen += [e.name for e in page]
        after = page[-1].name
    assert seen == [b"%03d" % i for i in range(25)]
    assert w.meta.readdir(p, b"010", 2)[0].name == b"011"
    assert w.meta.readdir(p, None, 0) == []


@pytest.mark.parametrize(
    ("name", "error"),
    [
        (b"", errors.InvalidArgument),
        (b".", errors.InvalidArgument),
        (b"..", errors.InvalidArgument),
        (b"a/b", errors.InvalidArgument),
        (b"a\0b", errors.InvalidArgument),
        (b"x" * 256, errors.NameTooLong),
    ],
)
def test_name_validation_everywhere(w: MetaWorld, name: bytes, error: type[Exception]) -> None:
    f = mkfile(w, R, b"f", None)
    calls: list[Callable[[], object]] = [
        lambda: w.meta.lookup(R, name),
        lambda: w.meta.create(R, name, 0o644, 0, 0),
        lambda: w.meta.mkdir(R, name, 0o755, 0, 0),
        lambda: w.meta.symlink(R, name, b"t", 0, 0),
        lambda: w.meta.link(f, R, name),
        lambda: w.meta.unlink(R, name),
        lambda: w.meta.rmdir(R, name),
        lambda: w.meta.rename(R, name, R, b"g"),
        lambda: w.meta.rename(R, b"f", R, name),
    ]
    for call in calls:
        with pytest.raises(error):
            call()
    w.meta.create(R, b"x" * 255, 0o644, 0, 0)  # the longest valid name


# -- creating -----------------------------------------------------------------


def test_create_is_tree_only_until_uploaded(w: MetaWorld) -> None:
    before = w.meta.getattr(R)
    w.clock.advance(1)
    a = w.meta.create(R, b"new", stat.S_IFREG | 0o640, 7, 8)
    assert a.is_reg and a.etag == "" and a.size == 0 and (a.uid, a.gid) == (7, 8)
    assert stat.S_IMODE(a.mode) == 0o640 and a.nlink == 1
    assert "new" not in w.ufs_names()
    root = w.meta.getattr(R)
    assert root.mtime_ns == root.ctime_ns == w.clock.now > before.mtime_ns
    with pytest.raises(errors.AlreadyExists):
        w.meta.create(R, b"new", 0o644, 0, 0)
    with pytest.raises(errors.NotADirectory):
        w.meta.create(a.inode, b"x", 0o644, 0, 0)
    fifo = w.meta.create(R, b"fifo", stat.S_IFIFO | 0o600, 0, 0)
    assert stat.S_ISFIFO(fifo.mode)
    dev = w.meta.create(R, b"dev", stat.S_IFCHR | 0o600, 0, 0, rdev=0x0501)
    assert dev.rdev == 0x0501
    w.expire()  # a refresh keeps tree-only entries
    assert {e.name for e in w.meta.readdir(R, None, 10)} == {b"new", b"fifo", b"dev"}
    done = w.upload(a.inode, b"payload")
    assert done.etag and done.size == 7 and w.ufs_data("new") == b"payload"
    w.expire()
    assert w.meta.lookup(R, b"new").etag == done.etag


def test_entries_of_a_set_group_id_directory_take_its_group(w: MetaWorld) -> None:
    """The tree applies the rule (Linux's inode_init_owner), whoever asks."""
    d = w.meta.mkdir(R, b"shared", 0o2775, 0, 4242).inode
    f = w.meta.create(d, b"f", stat.S_IFREG | 0o644, 1000, 1000)
    sub = w.meta.mkdir(d, b"sub", 0o755, 1000, 1000)
    link = w.meta.symlink(d, b"l", b"f", 1000, 1000)
    assert (f.uid, f.gid) == (1000, 4242) and not f.mode & stat.S_ISGID
    assert sub.gid == 4242 and sub.mode & stat.S_ISGID
    assert link.gid == 4242
    plain = w.meta.create(R, b"plain", stat.S_IFREG | 0o644, 1000, 1000)
    assert plain.gid == 1000


def test_mkdir_and_rmdir(w: MetaWorld) -> None:
    w.clock.advance(1)
    d = w.meta.mkdir(R, b"d", 0o700, 5, 6)
    assert d.is_dir and stat.S_IMODE(d.mode) == 0o700 and d.nlink == 2
    assert "d/" in w.ufs_names()
    root = w.meta.getattr(R)
    assert root.nlink == 3 and root.mtime_ns == w.clock.now
    with pytest.raises(errors.AlreadyExists):
        w.meta.mkdir(R, b"d", 0o700, 0, 0)
    sub = w.meta.mkdir(d.inode, b"sub", 0o755, 0, 0)
    assert w.meta.getattr(d.inode).nlink == 3
    with pytest.raises(errors.NotEmpty):
        w.meta.rmdir(R, b"d")
    f = mkfile(w, R, b"f")
    with pytest.raises(errors.NotADirectory):
        w.meta.rmdir(R, b"f")
    with pytest.raises(errors.IsADirectory):
        w.meta.unlink(R, b"d")
    with pytest.raises(errors.NotFound):
        w.meta.rmdir(R, b"zz")
    w.meta.rmdir(d.inode, b"sub")
    assert w.meta.getattr(d.inode).nlink == 2
    with pytest.raises(errors.NotFound):
        w.meta.getattr(sub.inode)
    w.meta.rmdir(R, b"d")
    assert w.meta.getattr(R).nlink == 2
    assert w.ufs_names() == {"f"}
    assert w.meta.getattr(f).is_reg


def test_rmdir_sees_content_only_in_the_ufs(w: MetaWorld) -> None:
    w.store.put_bytes("d/inner", b"1")
    w.meta.lookup(R, b"d")  # d itself never listed
    with pytest.raises(errors.NotEmpty):
        w.meta.rmdir(R, b"d")


def test_symlink_and_readlink(w: MetaWorld) -> None:
    s = w.meta.symlink(R, b"ln", b"../target", 3, 4)
    assert s.is_symlink and s.size == 9 and (s.uid, s.gid) == (3, 4)
    assert w.meta.readlink(s.inode) == b"../target"
    assert "ln" not in w.ufs_names()
    with pytest.raises(errors.InvalidArgument):
        w.meta.readlink(R)
    with pytest.raises(errors.AlreadyExists):
        w.meta.symlink(R, b"ln", b"x", 0, 0)
    w.meta.unlink(R, b"ln")
    with pytest.raises(errors.NotFound):
        w.meta.getattr(s.inode)


# -- removing and linking ------------------------------------------------------


def test_unlink_deletes_uploaded_object(w: MetaWorld) -> None:
    f = mkfile(w, R, b"f", b"data")
    w.clock.advance(1)
    after = w.meta.unlink(R, b"f")
    assert after.nlink == 0
    assert w.ufs_data("f") is None
    assert w.meta.getattr(R).mtime_ns == w.clock.now
    with pytest.raises(errors.NotFound):
        w.meta.getattr(f)
    with pytest.raises(errors.NotFound):
        w.meta.unlink(R, b"f")
    w.store.put_bytes("listed", b"1")
    w.expire()  # the root was listed already: the new object shows after the TTL
    w.meta.unlink(R, b"listed")
    assert w.ufs_data("listed") is None


def test_hard_links_and_unlinking_the_primary(w: MetaWorld) -> None:
    d = w.meta.mkdir(R, b"d", 0o755, 0, 0).inode
    f = mkfile(w, R, b"orig", b"bytes")
    w.clock.advance(1)
    attr = w.meta.link(f, d, b"alias")
    assert attr.nlink == 2 and attr.ctime_ns == w.clock.now
    assert w.meta.lookup(d, b"alias").inode == f
    with pytest.raises(errors.NotPermitted):
        w.meta.link(d, R, b"dirlink")
    with pytest.raises(errors.AlreadyExists):
        w.meta.link(f, R, b"orig")
    w.expire()  # the secondary name is tree-only: the refresh keeps it
    assert w.meta.lookup(d, b"alias").inode == f
    left = w.meta.unlink(R, b"orig")
    assert left.nlink == 1
    assert w.ufs_data("orig") is None and w.ufs_data("d/alias") == b"bytes"
    assert w.meta.object_key(f) == "d/alias"
    w.expire()
    assert w.meta.lookup(d, b"alias").inode == f
    w.meta.unlink(d, b"alias")
    assert w.ufs_data("d/alias") is None


def test_unlinking_a_secondary_name_keeps_the_object(w: MetaWorld) -> None:
    f = mkfile(w, R, b"a", b"1")
    w.meta.link(f, R, b"b")
    assert w.meta.unlink(R, b"b").nlink == 1
    assert w.ufs_data("a") == b"1" and w.meta.object_key(f) == "a"


def test_unlinked_while_open(w: MetaWorld) -> None:
    f = mkfile(w, R, b"f", b"abc")
    w.meta.setxattr(f, b"user.k", b"v")
    w.meta.open(f)
    w.meta.open(f)
    assert w.meta.unlink(R, b"f").nlink == 0
    assert w.meta.getattr(f).nlink == 0 and w.meta.getxattr(f, b"user.k") == b"v"
    with pytest.raises(errors.NotFound):
        w.meta.object_key(f)
    with pytest.raises(errors.NotFound):
        w.meta.link(f, R, b"back")
    w.meta.release(f)
    assert w.meta.getattr(f).size == 3
    w.meta.release(f)
    with pytest.raises(errors.NotFound):
        w.meta.getattr(f)
    with pytest.raises(errors.NotFound):
        w.meta.listxattr(f)


def test_ufs_failure_leaves_tree_unchanged(w: MetaWorld) -> None:
    from testkit.memory_store import MemoryObjectStore

    if not isinstance(w.store, MemoryObjectStore):
        pytest.skip("fault injection needs the memory store")
    f = mkfile(w, R, b"f")
    w.store.failures.update(
        make_dir=errors.RemoteIOError("down"),
        delete=errors.RemoteIOError("down"),
        rename=errors.RemoteIOError("down"),
    )
    with pytest.raises(errors.RemoteIOError):
        w.meta.mkdir(R, b"d", 0o755, 0, 0)
    with pytest.raises(errors.RemoteIOError):
        w.meta.unlink(R, b"f")
    with pytest.raises(errors.RemoteIOError):
        w.meta.rename(R, b"f", R, b"g")
    assert [e.name for e in w.meta.readdir(R, None, 10)] == [b"f"]
    assert w.meta.getattr(f).nlink == 1 and w.meta.getattr(R).nlink == 2
    w.store.failures["delete"] = RuntimeError("unexpected")
    with pytest.raises(errors.RemoteIOError):
        w.meta.unlink(R, b"f")


# -- attributes ------------------------------------------------------------------


def test_setattr(w: MetaWorld) -> None:
    f = mkfile(w, R, b"f", b"12345")
    w.clock.advance(1)
    a = w.meta.setattr(f, AttrChanges(mode=0o4711, uid=9, gid=10, size=3))
    assert a.is_reg and stat.S_IMODE(a.mode) == 0o4711 and (a.uid, a.gid, a.size) == (9, 10, 3)
    assert a.ctime_ns == w.clock.now
    a = w.meta.setattr(f, AttrChanges(atime_ns=11, mtime_ns=22, ctime_ns=33))
    assert (a.atime_ns, a.mtime_ns, a.ctime_ns) == (11, 22, 33)
    assert w.meta.getattr(f) == a
    with pytest.raises(errors.IsADirectory):
        w.meta.setattr(R, AttrChanges(size=0))
    with pytest.raises(errors.NotFound):
        w.meta.setattr(InodeId(4242), AttrChanges(mode=0))


def test_xattrs(w: MetaWorld) -> None:
    f = mkfile(w, R, b"f", None)
    assert w.meta.listxattr(f) == []
    with pytest.raises(errors.NoAttribute):
        w.meta.getxattr(f, b"user.a")
    with pytest.raises(errors.NoAttribute):
        w.meta.removexattr(f, b"user.a")
    with pytest.raises(errors.NoAttribute):
        w.meta.setxattr(f, b"user.a", b"1", XATTR_REPLACE)
    w.meta.setxattr(f, b"user.a", b"1", XATTR_CREATE)
    with pytest.raises(errors.AlreadyExists):
        w.meta.setxattr(f, b"user.a", b"2", XATTR_CREATE)
    w.meta.setxattr(f, b"user.a", b"2", XATTR_REPLACE)
    w.meta.setxattr(f, b"user.b", b"")
    assert w.meta.getxattr(f, b"user.a") == b"2" and w.meta.getxattr(f, b"user.b") == b""
    assert w.meta.listxattr(f) == [b"user.a", b"user.b"]
    w.meta.removexattr(f, b"user.a")
    assert w.meta.listxattr(f) == [b"user.b"]
    w.meta.setxattr(R, b"user.root", b"r")
    assert w.meta.getxattr(R, b"user.root") == b"r"


def test_statfs(w: MetaWorld) -> None:
    mkfile(w, R, b"f", None)
    s = w.meta.statfs()
    total, _ = w.store.statfs()
    assert s.total_blocks * s.block_size <= total and s.free_blocks <= s.total_blocks
    assert s.total_inodes - s.free_inodes == 2 and s.name_max == 255


def test_commit_upload(w: MetaWorld) -> None:
    f = mkfile(w, R, b"f", None)
    w.clock.advance(1)
    a = w.meta.commit_upload(f, 10, 123, "etag-1")
    assert (a.size, a.mtime_ns, a.etag, a.ctime_ns) == (10, 123, "etag-1", w.clock.now)
    with pytest.raises(errors.IsADirectory):
        w.meta.commit_upload(R, 1, 1, "e")


def test_commit_upload_is_refused_when_the_file_moved_since_its_put(w: MetaWorld) -> None:
    """The write-back race the soak found: an upload put its bytes under "a", the file
    was renamed to "b" before the commit; an unconditional commit recorded an object
    under "b" that was still under "a" (lost bytes). With the key, ESTALE instead."""
    f = mkfile(w, R, b"a", None)
    w.meta.commit_pending(f, 5, 1)
    w.meta.rename(R, b"a", R, b"b")
    with pytest.raises(errors.ObjectChanged):
        w.meta.commit_upload(f, 5, 1, "etag-a", "a")
    assert w.meta.getattr(f).etag == ""  # nothing recorded
    assert w.meta.commit_upload(f, 5, 1, "etag-b", "b").etag == "etag-b"


def test_commit_pending(w: MetaWorld) -> None:
    f = mkfile(w, R, b"f", None)
    w.meta.commit_upload(f, 10, 123, "etag-1")
    w.clock.advance(1)
    a = w.meta.commit_pending(f, 20, 456)
    assert (a.size, a.mtime_ns, a.etag, a.ctime_ns) == (20, 456, "", w.clock.now)
    assert w.meta.getattr(f).size == 20
    assert w.meta.commit_upload(f, 20, 456, "etag-2").etag == "etag-2"
    with pytest.raises(errors.IsADirectory):
        w.meta.commit_pending(R, 1, 1)


# -- concurrency and restart --------------------------------------------------------


def test_concurrent_create_of_one_name(w: MetaWorld) -> None:
    outcomes: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def attempt() -> None:
        barrier.wait()
        try:
            w.meta.create(R, b"race", 0o644, 0, 0)
            result = "ok"
        except errors.AlreadyExists:
            result = "exists"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["exists"] * 7 + ["ok"]
    assert len(w.meta.readdir(R, None, 10)) == 1


def test_restart_keeps_tree_only_state(w: MetaWorld) -> None:
    if not w.persistent:
        pytest.skip("MemoryKV does not persist")
    w.store.put_bytes("data/x", b"xx")
    data = w.meta.lookup(R, b"data").inode
    x = w.meta.lookup(data, b"x").inode
    w.meta.setattr(x, AttrChanges(mode=0o600, uid=42))
    w.meta.setxattr(x, b"user.tag", b"v")
    w.meta.symlink(R, b"ln", b"data/x", 0, 0)
    w.meta.link(x, R, b"hard")
    orphan = mkfile(w, R, b"orphan", None)
    w.meta.open(orphan)
    w.meta.unlink(R, b"orphan")
    w.reopen()
    w.expire()
    got = w.meta.lookup(data, b"x")
    assert got.inode == x and stat.S_IMODE(got.mode) == 0o600 and got.uid == 42
    assert w.meta.getxattr(x, b"user.tag") == b"v"
    assert w.meta.readlink(w.meta.lookup(R, b"ln").inode) == b"data/x"
    assert w.meta.lookup(R, b"hard").inode == x and got.nlink == 2
    with pytest.raises(errors.NotFound):
        w.meta.getattr(orphan)  # freed: its open handle died with the old process
    assert TTL > 0


def test_lookup_if_listed_answers_only_from_a_fresh_listing(w: MetaWorld) -> None:
    w.store.put_bytes("seen.txt", b"abc")
    assert w.meta.lookup_if_listed(R, b"seen.txt") is None  # never listed: needs the UFS
    attr = w.meta.lookup(R, b"seen.txt")
    assert w.meta.lookup_if_listed(R, b"seen.txt") == attr
    with pytest.raises(errors.NotFound):
        w.meta.lookup_if_listed(R, b"missing.txt")  # a fresh listing says it is not there
    w.expire()
    assert w.meta.lookup_if_listed(R, b"seen.txt") is None  # stale: list again first
