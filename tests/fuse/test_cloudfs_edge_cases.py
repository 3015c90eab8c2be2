"""Edge cases where the tree and the UFS must stay in step (one mount per backend)."""

from __future__ import annotations

import os
import stat

import pytest

from testkit.mounts import Backing
from tests.fuse.conftest import MountFactory


def test_links_appends_renames_and_removals_stay_in_step(
    backing: Backing, mount_factory: MountFactory
) -> None:
    backing.write_object("log.txt", b"line1\n")
    backing.write_object("target.txt", b"old target")
    backing.write_object("src.txt", b"new content")
    backing.write_object("d/a.txt", b"a")
    backing.write_object("d/e/b.txt", b"b")
    with mount_factory() as m:
        r = m.root
        # the first name of a hard-linked file goes; the other keeps the bytes
        (r / "first").write_bytes(b"linked data")
        os.link(r / "first", r / "second")
        os.unlink(r / "first")
        assert (r / "second").read_bytes() == b"linked data"
        # O_APPEND onto a UFS object, twice
        for line in (b"line2\n", b"line3\n"):
            with open(r / "log.txt", "ab") as f:
                f.write(line)
        # rename over an existing UFS object
        os.rename(r / "src.txt", r / "target.txt")
        # remove a UFS directory tree bottom-up
        os.unlink(r / "d/e/b.txt")
        os.rmdir(r / "d/e")
        os.unlink(r / "d/a.txt")
        os.rmdir(r / "d")
        expected = {
            "second": b"linked data",
            "log.txt": b"line1\nline2\nline3\n",
            "target.txt": b"new content",
        }

        def check() -> None:
            assert sorted(os.listdir(r)) == sorted(expected)
            for name, data in expected.items():
                assert (r / name).read_bytes() == data, name

        check()
        m.restart()
        check()
    assert backing.keys() == set(expected)
    for name, data in expected.items():
        assert backing.read_object(name) == data, name
    if backing.local_dir is not None:
        assert sorted(os.listdir(backing.local_dir)) == sorted(expected)
    else:
        assert backing.s3 is not None
        resp = backing.s3.client().list_objects_v2(Bucket=backing.bucket)
        assert sorted(o["Key"] for o in resp.get("Contents", [])) == sorted(expected)


@pytest.mark.parametrize("backing", ["s3"], indirect=True)
def test_object_and_prefix_with_the_same_name_is_a_directory(
    backing: Backing, mount_factory: MountFactory
) -> None:
    backing.write_object("both", b"object")
    backing.write_object("both/child.txt", b"child")
    with mount_factory() as m:
        assert os.listdir(m.root) == ["both"]
        assert stat.S_ISDIR(os.stat(m.root / "both").st_mode)
        assert (m.root / "both/child.txt").read_bytes() == b"child"
