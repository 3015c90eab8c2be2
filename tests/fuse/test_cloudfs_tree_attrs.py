"""What only the tree can hold survives a remount of the same cache dir, and stays out of the UFS.

Modes, owners, xattrs, symlinks, hard links and fifos have no place in an
object store: they live in the embedded tree under the cache directory.
"""

from __future__ import annotations

import os
import stat

from testkit.mounts import Backing
from tests.fuse.conftest import MountFactory


def test_tree_only_attributes_survive_remount(
    backing: Backing, mount_factory: MountFactory
) -> None:
    backing.write_object("pre.txt", b"from the UFS")
    backing.write_object("predir/x.txt", b"x")
    with mount_factory() as m:
        r = m.root
        (r / "f").write_bytes(b"file data")
        os.chmod(r / "f", 0o600)
        os.chown(r / "f", 1234, 5678)
        os.setxattr(r / "f", "user.color", b"blue")
        os.setxattr(r / "f", "user.empty", b"")
        os.symlink("f", r / "ln")
        os.symlink("/nowhere/at/all", r / "dangling")
        os.link(r / "f", r / "hl")
        os.mkfifo(r / "pipe", 0o640)
        (r / "d").mkdir()
        os.chmod(r / "d", 0o710)
        os.chown(r / "d", 42, 43)
        (r / "d/inner.txt").write_bytes(b"inner")
        os.symlink("../pre.txt", r / "d/up")
        # tree attributes on files and dirs that came from the UFS
        os.chmod(r / "pre.txt", 0o604)
        os.chown(r / "pre.txt", 777, 888)
        os.setxattr(r / "pre.txt", "user.origin", b"ufs")
        os.chmod(r / "predir", 0o701)
        os.setxattr(r / "predir", "user.dir", b"yes")

        def check() -> None:
            st = os.lstat(r / "f")
            assert stat.S_IMODE(st.st_mode) == 0o600
            assert (st.st_uid, st.st_gid) == (1234, 5678)
            assert st.st_nlink == 2
            assert os.getxattr(r / "f", "user.color") == b"blue"
            assert os.getxattr(r / "f", "user.empty") == b""
            assert sorted(os.listxattr(r / "f")) == ["user.color", "user.empty"]
            assert os.readlink(r / "ln") == "f"
            assert stat.S_ISLNK(os.lstat(r / "ln").st_mode)
            assert (r / "ln").read_bytes() == b"file data"
            assert os.readlink(r / "dangling") == "/nowhere/at/all"
            hl = os.lstat(r / "hl")
            assert hl.st_ino == st.st_ino and hl.st_nlink == 2
            assert (r / "hl").read_bytes() == b"file data"
            p = os.lstat(r / "pipe")
            assert stat.S_ISFIFO(p.st_mode)
            d = os.lstat(r / "d")
            assert stat.S_IMODE(d.st_mode) == 0o710
            assert (d.st_uid, d.st_gid) == (42, 43)
            assert os.readlink(r / "d/up") == "../pre.txt"
            assert (r / "d/up").read_bytes() == b"from the UFS"
            pre = os.lstat(r / "pre.txt")
            assert stat.S_IMODE(pre.st_mode) == 0o604
            assert (pre.st_uid, pre.st_gid) == (777, 888)
            assert os.getxattr(r / "pre.txt", "user.origin") == b"ufs"
            assert stat.S_IMODE(os.lstat(r / "predir").st_mode) == 0o701
            assert os.getxattr(r / "predir", "user.dir") == b"yes"
            assert sorted(os.listdir(r)) == sorted(
                ["f", "ln", "dangling", "hl", "pipe", "d", "pre.txt", "predir"]
            )

        check()
        m.restart()
        check()
        # and writing through the hard link is seen through the other name
        (r / "hl").write_bytes(b"via the link")
        assert (r / "f").read_bytes() == b"via the link"
        m.restart()
        check_after = (r / "f").read_bytes()
        assert check_after == b"via the link"
        assert os.getxattr(r / "f", "user.color") == b"blue"

    # only regular files ever become objects; the link name is not a second copy
    assert backing.keys() == {"f", "pre.txt", "d/inner.txt", "predir/x.txt"}
    assert backing.read_object("f") == b"via the link"
    assert backing.read_object("pre.txt") == b"from the UFS"
    if backing.local_dir is not None:
        assert not os.path.lexists(backing.local_dir / "ln")
        assert not os.path.lexists(backing.local_dir / "pipe")
        assert not os.path.lexists(backing.local_dir / "dangling")
        # modes and owners stay in the tree: the UFS copy has the store's own
        assert (backing.local_dir / "pre.txt").stat().st_uid != 777
