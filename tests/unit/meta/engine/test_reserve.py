"""Creates take no namespace lock; a change calling the UFS reserves what they could take.

Over the memory engine and over a real etcd (where creates and the
reserving change are optimistic transactions). The store blocks the
reserving change in its UFS call until the test lets it go, so the create
runs exactly in the window the reservation exists for.
"""

from __future__ import annotations

import contextlib
import errno
import stat
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from cloudfs.errors import FsError, RemoteIOError
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine import codec, reserve
from cloudfs.meta.engine.kv import KVEngine
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.types import ROOT_INODE, Attr, InodeId
from testkit.memory_store import MemoryObjectStore
from testkit.tree_check import check_tree

R = InodeId(ROOT_INODE)
FILE = stat.S_IFREG | 0o644
DIR = stat.S_IFDIR | 0o755
WAIT = 10.0


class GatedStore(MemoryObjectStore):
    """A memory store whose ``gate``d method waits for ``release`` (and says it entered)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = ""
        self.entered = threading.Event()
        self.release = threading.Event()

    def _enter(self, method: str) -> None:
        if method == self.gate:
            self.entered.set()
            assert self.release.wait(WAIT)
        super()._enter(method)


@pytest.fixture
def world(engine: KVEngine) -> Iterator[tuple[EmbeddedMeta, GatedStore]]:
    store = GatedStore()
    meta = EmbeddedMeta(engine, store, ttl=3600)
    meta.readdir(R, None, 1)
    yield meta, store
    report = check_tree(meta, engine)
    meta.close()
    assert not report.problems, report.problems


def _in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())
        except Exception as exc:  # kept for the test to look at
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


@contextlib.contextmanager
def _held_in_ufs(
    store: GatedStore, gate: str, change: Callable[[], object]
) -> Iterator[list[object]]:
    """Within: ``change`` runs in a thread, held inside the store's ``gate`` (so what it
    reserved stays reserved); yields where its outcome lands once it is let go."""
    store.gate = gate
    changing, changed = _in_thread(change)
    assert store.entered.wait(WAIT)
    try:
        yield changed
    finally:
        store.release.set()
        changing.join(WAIT)


def _create_while_gated(
    meta: EmbeddedMeta, store: GatedStore, gate: str, change: Callable[[], object], parent: InodeId
) -> object:
    """Run ``change`` until it blocks in the store's ``gate``, then a create of ``b"x"`` in
    ``parent``: the create must still be waiting when the change is let go."""
    store.gate = gate
    changing, changed = _in_thread(change)
    assert store.entered.wait(WAIT)
    creating, created = _in_thread(lambda: meta.create(parent, b"x", FILE, 0, 0))
    time.sleep(0.3)
    assert not created, f"the create did not wait for the reservation: {created}"
    store.release.set()
    changing.join(WAIT)
    creating.join(WAIT)
    assert changed and not isinstance(changed[0], Exception), changed
    return created[0]


def test_a_create_waits_for_a_mkdir_of_its_name_then_finds_it_taken(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    meta, store = world
    made = _create_while_gated(meta, store, "make_dir", lambda: meta.mkdir(R, b"x", DIR, 0, 0), R)
    assert isinstance(made, FsError) and made.errno == errno.EEXIST
    assert stat.S_ISDIR(meta.lookup(R, b"x").mode)


def test_a_create_waits_for_a_rename_onto_its_name(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    meta, store = world
    d = meta.mkdir(R, b"d", DIR, 0, 0).inode
    meta.mkdir(R, b"src", DIR, 0, 0)  # a directory: its rename is a UFS call
    move = lambda: meta.rename(R, b"src", d, b"x")  # noqa: E731
    made = _create_while_gated(meta, store, "rename_dir", move, d)
    assert isinstance(made, FsError) and made.errno == errno.EEXIST
    assert stat.S_ISDIR(meta.lookup(d, b"x").mode)


def test_a_create_in_a_directory_being_removed_waits_then_finds_it_gone(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    meta, store = world
    d = meta.mkdir(R, b"d", DIR, 0, 0).inode
    made = _create_while_gated(meta, store, "remove_dir", lambda: meta.rmdir(R, b"d"), d)
    assert isinstance(made, FsError) and made.errno == errno.ENOENT


def test_a_create_elsewhere_does_not_wait_for_a_change_in_the_ufs(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    meta, store = world
    with _held_in_ufs(store, "make_dir", lambda: meta.mkdir(R, b"slow", DIR, 0, 0)):
        started = time.monotonic()
        attr = meta.create(R, b"quick", FILE, 0, 0)  # the mkdir holds the namespace lock
        assert isinstance(attr, Attr) and time.monotonic() - started < 2.0


def test_an_inline_create_answers_none_at_once_while_its_name_is_reserved(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    """``create_if_ready`` (what a mount calls on its event loop) never waits out a
    reservation: it says None, and the waiting ``create`` decides."""
    meta, store = world
    with _held_in_ufs(store, "make_dir", lambda: meta.mkdir(R, b"x", DIR, 0, 0)) as made:
        started = time.monotonic()
        assert meta.create_if_ready(R, b"x", 0o644, 0, 0) is None
        assert time.monotonic() - started < 1.0
        other = meta.create_if_ready(R, b"y", 0o640, 7, 8)  # a free name: made at once
        assert other is not None and (other.mode, other.uid, other.gid) == (FILE & ~0o4, 7, 8)
    assert made and isinstance(made[0], Attr)
    assert meta.lookup(R, b"y").inode == other.inode


def test_an_inline_create_in_a_directory_due_for_listing_answers_none(engine: KVEngine) -> None:
    meta = EmbeddedMeta(engine, MemoryObjectStore(), ttl=3600)
    try:
        assert meta.create_if_ready(R, b"x", 0o644, 0, 0) is None  # the root was never listed
        meta.readdir(R, None, 1)
        assert meta.create_if_ready(R, b"x", 0o644, 0, 0) is not None
    finally:
        meta.close()


def test_a_failed_ufs_call_gives_the_name_back(world: tuple[EmbeddedMeta, GatedStore]) -> None:
    meta, store = world
    store.failures["make_dir"] = RemoteIOError("the store is away")
    with pytest.raises(FsError) as caught:
        meta.mkdir(R, b"x", DIR, 0, 0)
    assert caught.value.errno == errno.EIO
    del store.failures["make_dir"]
    assert meta.create(R, b"x", FILE, 0, 0).mode == FILE


def test_an_expired_reservation_is_ignored() -> None:
    kv = MemoryKV()
    clock = [10**18]
    meta = EmbeddedMeta(kv, MemoryObjectStore(), ttl=3600, clock=lambda: clock[0])
    try:
        with kv.transaction(write=True) as txn:  # left by a server that died mid-change
            reserve.hold(txn, [codec.reserved_name_key(ROOT_INODE, b"x")], clock[0])
        clock[0] += int((reserve.HOLD_FOR + 1) * 1e9)
        assert meta.create(R, b"x", FILE, 0, 0).mode == FILE
    finally:
        meta.close()


def _uploaded(meta: EmbeddedMeta, store: GatedStore, parent: InodeId, name: bytes) -> Attr:
    """A file whose bytes are an object in the store (so unlinking it is a UFS call)."""
    attr = meta.create(parent, name, FILE, 0, 0)
    key = meta.object_key(attr.inode)
    info = store.put_bytes(key, b"bytes")
    return meta.commit_upload(attr.inode, 5, 0, info.etag, key)


def test_a_link_waits_for_an_unlink_deleting_the_object(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    """The unlink decided to delete the object (one name): a link made meanwhile would
    keep a name whose bytes are gone. It waits, then finds the file unlinked."""
    meta, store = world
    f = _uploaded(meta, store, R, b"f")
    store.gate = "delete"
    unlinking, unlinked = _in_thread(lambda: meta.unlink(R, b"f"))
    assert store.entered.wait(WAIT)
    linking, linked = _in_thread(lambda: meta.link(f.inode, R, b"g"))
    time.sleep(0.3)
    assert not linked, f"the link did not wait: {linked}"
    store.release.set()
    unlinking.join(WAIT)
    linking.join(WAIT)
    assert isinstance(linked[0], FsError) and linked[0].errno == errno.ENOENT
    assert not isinstance(unlinked[0], Exception)


def test_two_unlinks_of_one_name_one_wins(world: tuple[EmbeddedMeta, GatedStore]) -> None:
    meta, store = world
    _uploaded(meta, store, R, b"f")
    store.gate = "delete"
    first, first_out = _in_thread(lambda: meta.unlink(R, b"f"))
    assert store.entered.wait(WAIT)
    second, second_out = _in_thread(lambda: meta.unlink(R, b"f"))
    time.sleep(0.2)
    store.release.set()
    first.join(WAIT)
    second.join(WAIT)
    assert not isinstance(first_out[0], Exception)
    assert isinstance(second_out[0], FsError) and second_out[0].errno == errno.ENOENT


def test_unlinks_in_other_directories_run_while_one_waits_on_the_store(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    """No volume-wide lock: an unlink stuck in the UFS holds up nobody else's."""
    meta, store = world
    a = meta.mkdir(R, b"a", DIR, 0, 0).inode
    b = meta.mkdir(R, b"b", DIR, 0, 0).inode
    _uploaded(meta, store, a, b"slow")
    quick = [_uploaded(meta, store, b, f"q{i}".encode()) for i in range(3)]
    store.gate = "delete"
    slow, _ = _in_thread(lambda: meta.unlink(a, b"slow"))
    assert store.entered.wait(WAIT)
    store.gate = ""  # the next deletes go through
    try:
        started = time.monotonic()
        for i in range(len(quick)):
            meta.unlink(b, f"q{i}".encode())
        assert time.monotonic() - started < 2.0
    finally:
        store.release.set()
        slow.join(WAIT)


def test_a_directory_rename_waits_for_changes_in_flight_then_runs_alone(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    """A directory present in the UFS moves every key below it: the rename takes the
    fence, waits for the unlink already in the UFS, and holds off a new one."""
    meta, store = world
    d = meta.mkdir(R, b"d", DIR, 0, 0).inode
    _uploaded(meta, store, d, b"f")
    _uploaded(meta, store, d, b"g")
    store.gate = "delete"
    unlinking, _ = _in_thread(lambda: meta.unlink(d, b"f"))
    assert store.entered.wait(WAIT)
    renaming, renamed = _in_thread(lambda: meta.rename(R, b"d", R, b"e"))
    time.sleep(0.3)
    assert not renamed, "the directory rename ran while an unlink in it was in the UFS"
    store.release.set()
    unlinking.join(WAIT)
    renaming.join(WAIT)
    assert renamed == [None] or not isinstance(renamed[0], Exception), renamed
    assert [e.name for e in meta.readdir(meta.lookup(R, b"e").inode, None, 10)] == [b"g"]
    assert sorted(store.stored_keys()) == ["e/", "e/g"]


def _removal_waits_for_a_name_coming_in(
    meta: EmbeddedMeta, store: GatedStore, gate: str, coming: Callable[[], object],
    removal: Callable[[], object],
) -> object:
    """Run ``coming`` (a change that puts a name in a directory) until it blocks in the
    store's ``gate``, then ``removal`` of that directory: its emptiness was decided while the
    name was on its way, so it must wait, and fail once the name is in."""
    with _held_in_ufs(store, gate, coming) as came:
        removing, removed = _in_thread(removal)
        time.sleep(0.3)
        assert not removed, f"the directory's removal did not wait for the name: {removed}"
    removing.join(WAIT)
    assert came and not isinstance(came[0], Exception), came
    return removed[0]


def test_an_rmdir_waits_for_a_mkdir_in_it_then_finds_it_not_empty(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    meta, store = world
    d = meta.mkdir(R, b"d", DIR, 0, 0).inode
    removed = _removal_waits_for_a_name_coming_in(
        meta, store, "make_dir", lambda: meta.mkdir(d, b"sub", DIR, 0, 0),
        lambda: meta.rmdir(R, b"d"),
    )
    assert isinstance(removed, FsError) and removed.errno == errno.ENOTEMPTY


def test_an_rmdir_waits_for_a_rename_into_it_then_finds_it_not_empty(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    """The rename reserves the new name, not the directory: the directory's emptiness
    must count reserved names (the etcd failover test found a file left in a removed one)."""
    meta, store = world
    d = meta.mkdir(R, b"d", DIR, 0, 0).inode
    _uploaded(meta, store, R, b"f")  # an object: its rename is a UFS call
    removed = _removal_waits_for_a_name_coming_in(
        meta, store, "rename", lambda: meta.rename(R, b"f", d, b"f"),
        lambda: meta.rmdir(R, b"d"),
    )
    assert isinstance(removed, FsError) and removed.errno == errno.ENOTEMPTY
    assert meta.lookup(d, b"f").size == 5


def test_a_rename_onto_a_directory_waits_for_a_mkdir_in_it(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    meta, store = world
    t = meta.mkdir(R, b"t", DIR, 0, 0).inode
    meta.mkdir(R, b"s", DIR, 0, 0)
    removed = _removal_waits_for_a_name_coming_in(
        meta, store, "make_dir", lambda: meta.mkdir(t, b"sub", DIR, 0, 0),
        lambda: meta.rename(R, b"s", R, b"t"),
    )
    assert isinstance(removed, FsError) and removed.errno == errno.ENOTEMPTY


def test_a_rename_into_a_directory_being_removed_waits_then_finds_it_gone(
    world: tuple[EmbeddedMeta, GatedStore],
) -> None:
    meta, store = world
    d = meta.mkdir(R, b"d", DIR, 0, 0).inode
    _uploaded(meta, store, R, b"f")
    with _held_in_ufs(store, "remove_dir", lambda: meta.rmdir(R, b"d")) as removed:
        moving, moved = _in_thread(lambda: meta.rename(R, b"f", d, b"f"))
        time.sleep(0.3)
        assert not moved, f"the rename did not wait for the rmdir: {moved}"
    moving.join(WAIT)
    assert removed == [None], removed
    assert isinstance(moved[0], FsError) and moved[0].errno == errno.ENOENT
    assert meta.lookup(R, b"f").size == 5
