"""Extended attributes (user.* namespace) through the mount."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest


def test_set_get_list_remove(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    assert os.listxattr(f) == []
    os.setxattr(f, "user.color", b"blue")
    os.setxattr(f, "user.size", b"42")
    assert os.getxattr(f, "user.color") == b"blue"
    assert sorted(os.listxattr(f)) == ["user.color", "user.size"]
    os.removexattr(f, "user.color")
    assert os.listxattr(f) == ["user.size"]
    with pytest.raises(OSError) as info:
        os.getxattr(f, "user.color")
    assert info.value.errno == errno.ENODATA


def test_overwrite_value_and_binary_values(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    os.setxattr(f, "user.k", b"a much longer first value")
    os.setxattr(f, "user.k", b"\x00\xff\x00")
    assert os.getxattr(f, "user.k") == b"\x00\xff\x00"
    os.setxattr(f, "user.empty", b"")
    assert os.getxattr(f, "user.empty") == b""
    assert "user.empty" in os.listxattr(f)


def test_larger_value(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    value = bytes(range(256)) * 8  # 2 KiB: fits every common filesystem
    os.setxattr(f, "user.blob", value)
    assert os.getxattr(f, "user.blob") == value


def test_many_attributes(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    names = [f"user.attr{i:02d}" for i in range(30)]
    for name in names:
        os.setxattr(f, name, name.encode())
    assert sorted(os.listxattr(f)) == names
    for name in names:
        assert os.getxattr(f, name) == name.encode()


def test_xattr_create_flag(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    os.setxattr(f, "user.k", b"1", os.XATTR_CREATE)
    with pytest.raises(FileExistsError) as info:
        os.setxattr(f, "user.k", b"2", os.XATTR_CREATE)
    assert info.value.errno == errno.EEXIST
    assert os.getxattr(f, "user.k") == b"1"


def test_xattr_replace_flag(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    with pytest.raises(OSError) as info:
        os.setxattr(f, "user.k", b"1", os.XATTR_REPLACE)
    assert info.value.errno == errno.ENODATA
    assert os.listxattr(f) == []
    os.setxattr(f, "user.k", b"1")
    os.setxattr(f, "user.k", b"2", os.XATTR_REPLACE)
    assert os.getxattr(f, "user.k") == b"2"


def test_remove_missing_is_enodata(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    with pytest.raises(OSError) as info:
        os.removexattr(f, "user.nothing")
    assert info.value.errno == errno.ENODATA


def test_xattr_on_missing_path_is_enoent(mnt: Path) -> None:
    with pytest.raises(FileNotFoundError):
        os.getxattr(mnt / "missing", "user.k")
    with pytest.raises(FileNotFoundError):
        os.setxattr(mnt / "missing", "user.k", b"v")
    with pytest.raises(FileNotFoundError):
        os.listxattr(mnt / "missing")


def test_xattr_on_directory(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    os.setxattr(mnt / "d", "user.dir", b"yes")
    assert os.getxattr(mnt / "d", "user.dir") == b"yes"
    assert os.listxattr(mnt / "d") == ["user.dir"]


def test_xattr_via_fd(mnt: Path) -> None:
    fd = os.open(mnt / "f", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.setxattr(fd, "user.fd", b"set via fd")
        assert os.getxattr(fd, "user.fd") == b"set via fd"
        assert os.listxattr(fd) == ["user.fd"]
        os.removexattr(fd, "user.fd")
        assert os.listxattr(fd) == []
    finally:
        os.close(fd)


def test_xattr_shared_by_hard_links(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"")
    os.link(mnt / "a", mnt / "b")
    os.setxattr(mnt / "a", "user.shared", b"1")
    assert os.getxattr(mnt / "b", "user.shared") == b"1"


def test_xattr_survives_rename(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"")
    os.setxattr(mnt / "a", "user.k", b"v")
    os.rename(mnt / "a", mnt / "b")
    assert os.getxattr(mnt / "b", "user.k") == b"v"


def test_xattr_gone_after_recreate(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"")
    os.setxattr(mnt / "a", "user.k", b"v")
    os.unlink(mnt / "a")
    (mnt / "a").write_bytes(b"")
    assert os.listxattr(mnt / "a") == []


def test_xattr_follows_symlink_by_default(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    os.symlink("f", mnt / "l")
    os.setxattr(mnt / "l", "user.k", b"on target")
    assert os.getxattr(mnt / "f", "user.k") == b"on target"
    assert os.listxattr(mnt / "l", follow_symlinks=False) == []


def test_user_xattr_on_symlink_itself_is_eperm(mnt: Path) -> None:
    """Linux allows user.* only on regular files and directories."""
    os.symlink("f", mnt / "l")
    with pytest.raises(PermissionError) as info:
        os.setxattr(mnt / "l", "user.k", b"v", follow_symlinks=False)
    assert info.value.errno == errno.EPERM


def test_user_xattr_on_fifo_is_eperm(mnt: Path) -> None:
    os.mkfifo(mnt / "p")
    with pytest.raises(PermissionError) as info:
        os.setxattr(mnt / "p", "user.k", b"v")
    assert info.value.errno == errno.EPERM


def test_name_too_long_is_erange(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    with pytest.raises(OSError) as info:
        os.setxattr(mnt / "f", "user." + "n" * 300, b"v")
    assert info.value.errno == errno.ERANGE


def test_value_too_large_is_e2big(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    with pytest.raises(OSError) as info:
        os.setxattr(mnt / "f", "user.big", b"x" * (64 * 1024 + 1))
    assert info.value.errno == errno.E2BIG


def test_setxattr_updates_ctime_not_mtime(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    os.utime(f, ns=(1_000_000_000, 1_000_000_000))
    time.sleep(0.05)
    before = os.stat(f)
    os.setxattr(f, "user.k", b"v")
    after = os.stat(f)
    assert after.st_ctime_ns > before.st_ctime_ns
    assert after.st_mtime_ns == before.st_mtime_ns


def test_xattr_does_not_change_content(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"content")
    os.setxattr(mnt / "f", "user.k", b"v" * 100)
    assert (mnt / "f").read_bytes() == b"content"
    assert os.stat(mnt / "f").st_size == 7
