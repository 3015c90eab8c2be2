"""Changes made directly in the UFS, behind the mount's back, show up after --meta-ttl."""

from __future__ import annotations

import os
import stat
import time

import pytest

from testkit.mounts import VOLUME_PROPERTY, Backing
from tests.fuse.conftest import MountFactory

TTL_WAIT = 1.5


def test_ufs_changes_are_seen_after_the_ttl(backing: Backing, mount_factory: MountFactory) -> None:
    if backing.is_tree:
        pytest.skip(VOLUME_PROPERTY)
    old = {
        "grow.txt": b"x" * 100,
        "same.bin": os.urandom(64 * 1024),
        "del.txt": b"doomed",
        "sub/nested.txt": b"nested old",
        "sub/del2.txt": b"doomed too",
    }
    for key, data in old.items():
        backing.write_object(key, data)
    with mount_factory("--meta-ttl", "1") as m:
        r = m.root
        assert sorted(os.listdir(r)) == ["del.txt", "grow.txt", "same.bin", "sub"]
        for key, data in old.items():  # read once: the blocks are cached now
            assert (r / key).read_bytes() == data
        # tree-only attributes of a UFS file outlive a change of its object
        os.chmod(r / "grow.txt", 0o600)
        os.setxattr(r / "grow.txt", "user.tag", b"t")

        new = {
            "grow.txt": os.urandom(5000),
            "same.bin": os.urandom(64 * 1024),  # same size, different bytes
            "added.txt": b"appeared behind the mount's back",
            "sub/nested.txt": b"nested new, longer",
            "newdir/deep/file.txt": b"in a new directory",
        }
        time.sleep(0.05)  # a distinct mtime for the local store
        for key, data in new.items():
            backing.write_object(key, data)
        backing.delete_object("del.txt")
        backing.delete_object("sub/del2.txt")

        time.sleep(TTL_WAIT)
        assert sorted(os.listdir(r)) == ["added.txt", "grow.txt", "newdir", "same.bin", "sub"]
        assert sorted(os.listdir(r / "sub")) == ["nested.txt"]
        assert not (r / "del.txt").exists()
        assert stat.S_IMODE(os.stat(r / "grow.txt").st_mode) == 0o600
        assert os.getxattr(r / "grow.txt", "user.tag") == b"t"
        for key, data in new.items():
            assert os.stat(r / key).st_size == len(data), key
            assert (r / key).read_bytes() == data, key
        # a handle opened on the new version reads it from any offset
        with open(r / "same.bin", "rb") as f:
            f.seek(40_000)
            assert f.read(100) == new["same.bin"][40_000:40_100]

        # a second round of changes to the same names
        newer = os.urandom(5000)
        time.sleep(0.05)
        backing.write_object("grow.txt", newer)
        time.sleep(TTL_WAIT)
        assert (r / "grow.txt").read_bytes() == newer


def test_lookup_of_a_name_added_behind_the_back(
    backing: Backing, mount_factory: MountFactory
) -> None:
    """Not only listing: a plain stat/open by name finds the new object after the TTL."""
    if backing.is_tree:
        pytest.skip(VOLUME_PROPERTY)
    backing.write_object("a.txt", b"a")
    with mount_factory("--meta-ttl", "1") as m:
        assert os.listdir(m.root) == ["a.txt"]
        backing.write_object("b.txt", b"bbb")
        time.sleep(TTL_WAIT)
        assert os.stat(m.root / "b.txt").st_size == 3
        assert (m.root / "b.txt").read_bytes() == b"bbb"
