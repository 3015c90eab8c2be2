"""Hard links and symbolic links through the mount."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

# --- hard links ----------------------------------------------------------------


def test_link_shares_inode_and_counts_links(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"data")
    os.link(mnt / "a", mnt / "b")
    sa, sb = os.stat(mnt / "a"), os.stat(mnt / "b")
    assert sa.st_ino == sb.st_ino
    assert sa.st_nlink == sb.st_nlink == 2
    os.link(mnt / "b", mnt / "c")
    assert os.stat(mnt / "a").st_nlink == 3
    os.unlink(mnt / "a")
    assert os.stat(mnt / "b").st_nlink == 2
    assert os.stat(mnt / "c").st_nlink == 2
    assert (mnt / "c").read_bytes() == b"data"


def test_write_through_one_link_is_seen_through_other(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"before")
    os.link(mnt / "a", mnt / "b")
    (mnt / "a").write_bytes(b"after!!")
    assert (mnt / "b").read_bytes() == b"after!!"
    os.truncate(mnt / "b", 2)
    assert (mnt / "a").read_bytes() == b"af"
    assert os.stat(mnt / "a").st_size == 2


def test_link_across_directories(mnt: Path) -> None:
    os.mkdir(mnt / "d1")
    os.mkdir(mnt / "d2")
    (mnt / "d1" / "f").write_bytes(b"x")
    os.link(mnt / "d1" / "f", mnt / "d2" / "g")
    assert os.stat(mnt / "d2" / "g").st_ino == os.stat(mnt / "d1" / "f").st_ino
    os.unlink(mnt / "d1" / "f")
    os.rmdir(mnt / "d1")
    assert (mnt / "d2" / "g").read_bytes() == b"x"
    assert os.stat(mnt / "d2" / "g").st_nlink == 1


def test_chmod_through_one_link_seen_through_other(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"")
    os.link(mnt / "a", mnt / "b")
    os.chmod(mnt / "a", 0o600)
    assert stat.S_IMODE(os.stat(mnt / "b").st_mode) == 0o600


def test_link_count_in_open_fd_follows_links(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"")
    fd = os.open(mnt / "a", os.O_RDONLY)
    try:
        os.link(mnt / "a", mnt / "b")
        assert os.fstat(fd).st_nlink == 2
        os.unlink(mnt / "a")
        os.unlink(mnt / "b")
        assert os.fstat(fd).st_nlink == 0
    finally:
        os.close(fd)


def test_link_onto_existing_is_eexist(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"a")
    (mnt / "b").write_bytes(b"b")
    with pytest.raises(FileExistsError):
        os.link(mnt / "a", mnt / "b")
    assert (mnt / "b").read_bytes() == b"b"
    assert os.stat(mnt / "a").st_nlink == 1


def test_link_missing_source_is_enoent(mnt: Path) -> None:
    with pytest.raises(FileNotFoundError):
        os.link(mnt / "missing", mnt / "b")
    assert not (mnt / "b").exists()


def test_link_to_directory_is_eperm(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    with pytest.raises(PermissionError) as info:
        os.link(mnt / "d", mnt / "d2")
    assert info.value.errno == errno.EPERM


def test_link_to_symlink_links_the_symlink_itself(mnt: Path) -> None:
    (mnt / "target").write_bytes(b"t")
    os.symlink("target", mnt / "sym")
    os.link(mnt / "sym", mnt / "hard", follow_symlinks=False)
    assert os.path.islink(mnt / "hard")
    assert os.readlink(mnt / "hard") == "target"
    assert os.lstat(mnt / "hard").st_ino == os.lstat(mnt / "sym").st_ino
    assert os.lstat(mnt / "sym").st_nlink == 2


def test_link_to_fifo(mnt: Path) -> None:
    os.mkfifo(mnt / "p")
    os.link(mnt / "p", mnt / "q")
    assert stat.S_ISFIFO(os.stat(mnt / "q").st_mode)
    assert os.stat(mnt / "p").st_nlink == 2


def test_hard_links_listed_in_readdir(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"")
    os.link(mnt / "a", mnt / "b")
    with os.scandir(mnt) as it:
        inodes = {e.name: e.inode() for e in it}
    assert inodes["a"] == inodes["b"]


# --- symlinks ---------------------------------------------------------------


def test_symlink_and_readlink(mnt: Path) -> None:
    (mnt / "target").write_bytes(b"content")
    os.symlink("target", mnt / "link")
    assert os.readlink(mnt / "link") == "target"
    st = os.lstat(mnt / "link")
    assert stat.S_ISLNK(st.st_mode)
    assert st.st_size == len("target")
    assert (mnt / "link").read_bytes() == b"content"
    assert os.stat(mnt / "link").st_ino == os.stat(mnt / "target").st_ino


def test_symlink_target_is_stored_verbatim(mnt: Path) -> None:
    targets = [
        "../../some/where/else",
        "/absolute/path/outside",
        "name with spaces",
        "./dot/./slash//double",
        "x" * 1000,
    ]
    for i, target in enumerate(targets):
        os.symlink(target, mnt / f"l{i}")
        assert os.readlink(mnt / f"l{i}") == target
        assert os.lstat(mnt / f"l{i}").st_size == len(target.encode())


def test_symlink_with_non_utf8_target(mnt: Path) -> None:
    target = b"\xff\xfe-not-utf8"
    os.symlink(target, os.fsencode(mnt / "l"))
    assert os.readlink(os.fsencode(mnt / "l")) == target


def test_symlink_to_directory_resolves(mnt: Path) -> None:
    os.mkdir(mnt / "real")
    (mnt / "real" / "f").write_bytes(b"via dir link")
    os.symlink("real", mnt / "alias")
    assert (mnt / "alias" / "f").read_bytes() == b"via dir link"
    assert os.listdir(mnt / "alias") == ["f"]
    assert os.path.isdir(mnt / "alias")
    assert os.path.islink(mnt / "alias")


def test_relative_symlink_resolves_from_its_directory(mnt: Path) -> None:
    os.makedirs(mnt / "a" / "b")
    (mnt / "top").write_bytes(b"top")
    os.symlink("../../top", mnt / "a" / "b" / "up")
    assert (mnt / "a" / "b" / "up").read_bytes() == b"top"


def test_symlink_chain(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"end")
    os.symlink("f", mnt / "l1")
    os.symlink("l1", mnt / "l2")
    os.symlink("l2", mnt / "l3")
    assert (mnt / "l3").read_bytes() == b"end"


def test_symlink_loop_is_eloop(mnt: Path) -> None:
    os.symlink("b", mnt / "a")
    os.symlink("a", mnt / "b")
    with pytest.raises(OSError) as info:
        os.stat(mnt / "a")
    assert info.value.errno == errno.ELOOP
    with pytest.raises(OSError) as info:
        os.open(mnt / "a", os.O_RDONLY)
    assert info.value.errno == errno.ELOOP


def test_dangling_symlink(mnt: Path) -> None:
    os.symlink("missing", mnt / "dangling")
    assert os.path.lexists(mnt / "dangling")
    assert not os.path.exists(mnt / "dangling")
    with pytest.raises(FileNotFoundError):
        os.stat(mnt / "dangling")


def test_o_nofollow_on_symlink_is_eloop(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    os.symlink("f", mnt / "l")
    with pytest.raises(OSError) as info:
        os.open(mnt / "l", os.O_RDONLY | os.O_NOFOLLOW)
    assert info.value.errno == errno.ELOOP


def test_symlink_onto_existing_is_eexist(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"keep")
    with pytest.raises(FileExistsError):
        os.symlink("elsewhere", mnt / "f")
    assert (mnt / "f").read_bytes() == b"keep"
    os.symlink("x", mnt / "l")
    with pytest.raises(FileExistsError):
        os.symlink("y", mnt / "l")
    assert os.readlink(mnt / "l") == "x"


def test_readlink_of_non_symlink_is_einval(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    with pytest.raises(OSError) as info:
        os.readlink(mnt / "f")
    assert info.value.errno == errno.EINVAL
    os.mkdir(mnt / "d")
    with pytest.raises(OSError) as info:
        os.readlink(mnt / "d")
    assert info.value.errno == errno.EINVAL


def test_unlink_symlink_leaves_target(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"x")
    os.symlink("f", mnt / "l")
    os.unlink(mnt / "l")
    assert not os.path.lexists(mnt / "l")
    assert (mnt / "f").read_bytes() == b"x"


def test_lchown_and_utime_on_symlink_do_not_touch_target(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"x")
    os.utime(mnt / "f", ns=(1_000_000_000, 1_000_000_000))
    os.symlink("f", mnt / "l")
    os.utime(mnt / "l", ns=(5_000_000_000, 6_000_000_000), follow_symlinks=False)
    os.lchown(mnt / "l", 1234, 4321)
    lst = os.lstat(mnt / "l")
    assert (lst.st_uid, lst.st_gid) == (1234, 4321)
    assert lst.st_mtime_ns == 6_000_000_000
    st = os.stat(mnt / "f")
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert st.st_mtime_ns == 1_000_000_000


def test_chmod_follows_symlink(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    os.chmod(mnt / "f", 0o644)
    os.symlink("f", mnt / "l")
    os.chmod(mnt / "l", 0o600)
    assert stat.S_IMODE(os.stat(mnt / "f").st_mode) == 0o600
    assert stat.S_ISLNK(os.lstat(mnt / "l").st_mode)
