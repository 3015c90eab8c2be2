"""Names the UFS cannot hold: the stores' pure rules, and the tree refusing them up front.

The tree tests run over the memory store (S3's rules: keys of at most 1024
UTF-8 bytes, a directory's marker ``key/`` included).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from cloudfs import errors
from cloudfs.meta.engine.ufs_names import longest_below
from cloudfs.meta.interface import RENAME_EXCHANGE
from cloudfs.types import ROOT_INODE, InodeId
from cloudfs.ufs.hdfs import validate_hdfs_path
from cloudfs.ufs.local import LocalObjectStore
from cloudfs.ufs.s3_errors import S3_KEY_MAX, validate_s3_key
from testkit.meta_world import MetaWorld, mkfile

R = ROOT_INODE
S3_WORLDS = pytest.mark.parametrize("w", ["memory-kv", "lmdb-kv"], indirect=True)


def test_s3_keys_are_utf8_of_at_most_1024_bytes() -> None:
    validate_s3_key("k" * S3_KEY_MAX)
    validate_s3_key("é" * (S3_KEY_MAX // 2))
    with pytest.raises(errors.NameTooLong):
        validate_s3_key("k" * (S3_KEY_MAX + 1))
    with pytest.raises(errors.NameTooLong):
        validate_s3_key("é" * (S3_KEY_MAX // 2) + "k")
    with pytest.raises(errors.IllegalName):  # EILSEQ, as before
        validate_s3_key("bad-\udcff")


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/data/a:b", errors.InvalidArgument),
        ("/data/./b", errors.InvalidArgument),
        ("/data/../b", errors.InvalidArgument),
        ("/data//b", errors.InvalidArgument),
        ("/.reserved/x", errors.InvalidArgument),
        ("/data/" + "n" * 256, errors.NameTooLong),
        ("/data/" + "é" * 128, errors.NameTooLong),
        ("/" + "d/" * 1000 + "f", errors.NameTooLong),
        ("/" + ("d" * 200 + "/") * 40 + "f", errors.NameTooLong),
    ],
)
def test_hdfs_refuses_what_the_namenode_refuses(path: str, error: type[errors.FsError]) -> None:
    with pytest.raises(error):
        validate_hdfs_path(path)


def test_hdfs_accepts_ordinary_paths() -> None:
    validate_hdfs_path("/")
    validate_hdfs_path("/data/" + "n" * 255)
    validate_hdfs_path("/data/.reserved")  # only the filesystem root's is the namenode's
    validate_hdfs_path("/" + ("d" * 200 + "/") * 39 + "f")


def test_local_host_paths_are_at_most_4095_bytes(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    base = len(os.fsencode(str(tmp_path))) + 1  # the root and the slash after it
    name_room = 4095 - base
    dirs = "/".join(["d" * 200] * ((name_room - 60) // 201))  # leaves 60..260 bytes
    room = 4095 - base - len(dirs) - 1  # for the last name
    store.validate_key(f"{dirs}/{'f' * room}")
    store.validate_key(f"{dirs}/{'d' * room}", directory=True)
    with pytest.raises(errors.NameTooLong):
        store.validate_key(f"{dirs}/{'f' * (room + 1)}")
    with pytest.raises(errors.NameTooLong):
        store.validate_key(f"{dirs}/{'d' * (room + 1)}", directory=True)
    # A file arrives under a temporary name beside it: a short name counts at its length.
    with pytest.raises(errors.NameTooLong):
        store.validate_key(f"{dirs}/{'d' * (room - 20)}/x")


def _near_limit(w: MetaWorld, parent: InodeId, key: str) -> tuple[InodeId, str, int]:
    """Directories below ``parent`` until a file name of 150..255 bytes fills a key."""
    while S3_KEY_MAX - len(key) - 1 > 255:
        name = "d" * min(200, S3_KEY_MAX - len(key) - 1 - 150)
        parent = w.meta.mkdir(parent, name.encode(), 0o755, 0, 0).inode
        key = f"{key}/{name}"
    return parent, key, S3_KEY_MAX - len(key) - 1


@S3_WORLDS
def test_every_kind_of_name_is_refused_past_the_limit(
    w: MetaWorld, caplog: pytest.LogCaptureFixture
) -> None:
    top = w.meta.mkdir(R, b"top", 0o755, 0, 0).inode
    deep, key, room = _near_limit(w, top, "top")
    f = mkfile(w, top, b"f", b"x")
    over = b"n" * (room + 1)
    caplog.set_level(logging.INFO, "cloudfs.meta.engine.ufs_names")
    refused = [
        lambda: w.meta.create(deep, over, stat.S_IFREG | 0o644, 0, 0),
        lambda: w.meta.create(deep, over, stat.S_IFIFO | 0o644, 0, 0),
        lambda: w.meta.mkdir(deep, b"n" * room, 0o755, 0, 0),  # its marker: key/
        lambda: w.meta.symlink(deep, over, b"target", 0, 0),
        lambda: w.meta.link(f, deep, over),
        lambda: w.meta.rename(top, b"f", deep, over, 0),
    ]
    for call in refused:
        with pytest.raises(errors.NameTooLong):
            call()
    assert [e.name for e in w.meta.readdir(deep, None, 100)] == []
    assert w.meta.getattr(f).nlink == 1 and w.meta.object_key(f) == "top/f"
    assert w.ufs_names(key) == set()
    records = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(records) == len(refused)
    assert all(r.levelno == logging.INFO and r.exc_info is None for r in records)
    assert records[0].getMessage().startswith("create 'top/")
    # One byte less fits.
    w.meta.create(deep, b"n" * room, stat.S_IFREG | 0o644, 0, 0)
    w.meta.mkdir(deep, b"m" * (room - 1), 0o755, 0, 0)


@S3_WORLDS
def test_directory_rename_counts_the_longest_key_below(w: MetaWorld) -> None:
    """Tree-only entries (a symlink) count too: their keys are the tree's."""
    a = w.meta.mkdir(R, b"a", 0o755, 0, 0).inode
    deep, key, room = _near_limit(w, a, "a")
    w.meta.symlink(deep, b"s" * room, b"target", 0, 0)
    with pytest.raises(errors.NameTooLong):
        w.meta.rename(R, b"a", R, b"ab", 0)
    assert w.meta.lookup(R, b"a").inode == a and "a/" in w.ufs_names()
    w.meta.rename(R, b"a", R, b"b", 0)  # the same length fits
    assert w.meta.object_key(deep) == "b" + key[1:]
    # An exchange moves both: the short-named directory may not take the long name.
    w.meta.mkdir(R, b"cc", 0o755, 0, 0)
    with pytest.raises(errors.NameTooLong):
        w.meta.rename(R, b"cc", R, b"b", RENAME_EXCHANGE)
    assert w.meta.lookup(R, b"b").inode == a


@S3_WORLDS
def test_longest_below_finds_the_longest_file_and_directory(w: MetaWorld) -> None:
    a = w.meta.mkdir(R, b"a", 0o755, 0, 0).inode
    b = w.meta.mkdir(a, b"bb", 0o755, 0, 0).inode
    w.meta.mkdir(b, b"c" * 10, 0o755, 0, 0)
    mkfile(w, a, b"f" * 20, None)
    mkfile(w, b, b"g", None)
    w.meta.symlink(b, "é".encode() * 5, b"t", 0, 0)
    engine = w.meta._ctx.kv  # type: ignore[attr-defined]
    with engine.transaction(write=False) as txn:
        file, directory = longest_below(txn, a)
    assert file == "/" + "f" * 20
    assert directory == "/bb/" + "c" * 10
