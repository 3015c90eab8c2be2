"""Record encoding, name rules and small tree primitives."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudfs import errors
from cloudfs.meta.engine import codec, tree
from cloudfs.meta.engine.codec import InodeRecord
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.meta.engine.names import child_key, is_valid_name, validate_name

u32 = st.integers(0, 2**32 - 1)
u63 = st.integers(0, 2**63 - 1)


@given(
    mode=u32,
    nlink=u32,
    uid=u32,
    gid=u32,
    size=u63,
    times=st.tuples(u63, u63, u63),
    rdev=u63,
    etag=st.text(max_size=80),
    parent=u63,
    name=st.binary(max_size=255),
    loaded=u63,
    ufs=st.booleans(),
)
def test_inode_record_round_trips(
    mode: int,
    nlink: int,
    uid: int,
    gid: int,
    size: int,
    times: tuple[int, int, int],
    rdev: int,
    etag: str,
    parent: int,
    name: bytes,
    loaded: int,
    ufs: bool,
) -> None:
    rec = InodeRecord(
        mode=mode,
        nlink=nlink,
        uid=uid,
        gid=gid,
        size=size,
        atime_ns=times[0],
        mtime_ns=times[1],
        ctime_ns=times[2],
        rdev=rdev,
        etag=etag,
        parent=parent,
        name=name,
        loaded_at_ns=loaded,
        ufs=ufs,
    )
    assert codec.decode_inode(codec.encode_inode(rec)) == rec


def test_unknown_record_version_is_corruption() -> None:
    data = codec.encode_inode(InodeRecord(0, 1, 0, 0, 0, 0, 0, 0))
    with pytest.raises(errors.FsError):
        codec.decode_inode(b"\x09" + data[1:])


def test_keys_sort_numerically() -> None:
    assert codec.inode_key(255) < codec.inode_key(256)
    assert codec.dentry_key(1, b"\xff") < codec.dentry_prefix(2)
    assert codec.split_link_key(codec.link_key(5, 7, b"n")) == (7, b"n")


def test_names() -> None:
    validate_name(b"ok name")
    assert not is_valid_name(b"a\0") and not is_valid_name(b"") and is_valid_name(b"...")
    assert child_key("", b"a") == "a" and child_key("a/b", b"c") == "a/b/c"
    assert child_key("", b"\xff") == "\udcff"


def test_alloc_and_key_of_detect_orphans() -> None:
    kv = MemoryKV()
    with kv.transaction(write=True) as txn:
        first = tree.alloc_inodes(txn, 3)
        assert tree.alloc_inodes(txn, 1) == first + 3
        tree.save(txn, first, InodeRecord(0o100644, 0, 0, 0, 0, 0, 0, 0))
        with pytest.raises(errors.NotFound):
            tree.key_of(txn, first)


def test_memory_kv_rejects_nested_transactions() -> None:
    kv = MemoryKV()
    with kv.transaction(write=False), pytest.raises(RuntimeError), kv.transaction(write=False):
        pass
