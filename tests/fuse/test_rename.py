"""rename and renameat2 (RENAME_NOREPLACE, RENAME_EXCHANGE) through the mount."""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from pathlib import Path

import pytest

AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2

_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = _libc.renameat2
_renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
_renameat2.restype = ctypes.c_int


def renameat2(src: Path, dst: Path, flags: int) -> None:
    """renameat2(AT_FDCWD, src, AT_FDCWD, dst, flags); raises OSError with errno."""
    if _renameat2(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(src), None, str(dst))


# --- plain rename ---------------------------------------------------------------


def test_rename_file_in_same_dir(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"content")
    ino = os.stat(mnt / "a").st_ino
    os.rename(mnt / "a", mnt / "b")
    assert not (mnt / "a").exists()
    assert (mnt / "b").read_bytes() == b"content"
    assert os.stat(mnt / "b").st_ino == ino
    assert os.listdir(mnt) == ["b"]


def test_rename_file_across_dirs(mnt: Path) -> None:
    os.mkdir(mnt / "d1")
    os.mkdir(mnt / "d2")
    (mnt / "d1" / "f").write_bytes(b"moving")
    os.rename(mnt / "d1" / "f", mnt / "d2" / "g")
    assert os.listdir(mnt / "d1") == []
    assert (mnt / "d2" / "g").read_bytes() == b"moving"


def test_rename_over_existing_file_replaces_it(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"new")
    (mnt / "b").write_bytes(b"old content")
    ino = os.stat(mnt / "a").st_ino
    os.rename(mnt / "a", mnt / "b")
    assert (mnt / "b").read_bytes() == b"new"
    assert os.stat(mnt / "b").st_ino == ino
    assert os.listdir(mnt) == ["b"]


def test_rename_over_open_file_keeps_old_data_for_reader(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"new")
    (mnt / "b").write_bytes(b"old content")
    fd = os.open(mnt / "b", os.O_RDONLY)
    try:
        os.rename(mnt / "a", mnt / "b")
        assert os.pread(fd, 100, 0) == b"old content"
        assert os.fstat(fd).st_nlink == 0
    finally:
        os.close(fd)
    assert (mnt / "b").read_bytes() == b"new"


def test_rename_over_hard_link_drops_one_link(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"a")
    (mnt / "b").write_bytes(b"b")
    os.link(mnt / "b", mnt / "b2")
    os.rename(mnt / "a", mnt / "b")
    assert os.stat(mnt / "b2").st_nlink == 1
    assert (mnt / "b2").read_bytes() == b"b"


def test_rename_to_same_hard_link_is_noop(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"x")
    os.link(mnt / "a", mnt / "b")
    os.rename(mnt / "a", mnt / "b")
    # POSIX: both names refer to the same file, so rename does nothing
    assert sorted(os.listdir(mnt)) == ["a", "b"]
    assert os.stat(mnt / "a").st_nlink == 2


def test_rename_to_itself_is_noop(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"x")
    os.rename(mnt / "a", mnt / "a")
    assert (mnt / "a").read_bytes() == b"x"


def test_rename_open_file_keeps_fd_working(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"abc")
    fd = os.open(mnt / "a", os.O_RDWR)
    try:
        os.rename(mnt / "a", mnt / "b")
        os.pwrite(fd, b"Z", 3)
        assert os.pread(fd, 10, 0) == b"abcZ"
    finally:
        os.close(fd)
    assert (mnt / "b").read_bytes() == b"abcZ"


def test_rename_directory_with_contents(mnt: Path) -> None:
    (mnt / "d" / "sub").mkdir(parents=True)
    (mnt / "d" / "sub" / "f").write_bytes(b"deep")
    os.mkdir(mnt / "other")
    os.rename(mnt / "d", mnt / "other" / "moved")
    assert (mnt / "other" / "moved" / "sub" / "f").read_bytes() == b"deep"
    assert not (mnt / "d").exists()
    assert (
        os.stat(mnt / "other" / "moved" / "sub" / "..").st_ino
        == os.stat(mnt / "other" / "moved").st_ino
    )


def test_rename_directory_updates_parent_nlink(mnt: Path) -> None:
    os.mkdir(mnt / "p1")
    os.mkdir(mnt / "p2")
    os.mkdir(mnt / "p1" / "d")
    assert os.stat(mnt / "p1").st_nlink == 3
    assert os.stat(mnt / "p2").st_nlink == 2
    os.rename(mnt / "p1" / "d", mnt / "p2" / "d")
    assert os.stat(mnt / "p1").st_nlink == 2
    assert os.stat(mnt / "p2").st_nlink == 3


def test_rename_dir_over_empty_dir(mnt: Path) -> None:
    os.mkdir(mnt / "src")
    (mnt / "src" / "f").write_bytes(b"kept")
    os.mkdir(mnt / "dst")
    os.rename(mnt / "src", mnt / "dst")
    assert not (mnt / "src").exists()
    assert (mnt / "dst" / "f").read_bytes() == b"kept"
    assert os.stat(mnt).st_nlink == 3


def test_rename_dir_over_non_empty_dir_is_enotempty(mnt: Path) -> None:
    os.mkdir(mnt / "src")
    os.mkdir(mnt / "dst")
    (mnt / "dst" / "f").write_bytes(b"")
    with pytest.raises(OSError) as info:
        os.rename(mnt / "src", mnt / "dst")
    # Linux returns ENOTEMPTY (POSIX also allows EEXIST)
    assert info.value.errno == errno.ENOTEMPTY
    assert (mnt / "src").is_dir()
    assert (mnt / "dst" / "f").exists()


def test_rename_dir_over_file_is_enotdir(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    (mnt / "f").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        os.rename(mnt / "d", mnt / "f")
    assert (mnt / "d").is_dir()
    assert (mnt / "f").is_file()


def test_rename_file_over_dir_is_eisdir(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    (mnt / "f").write_bytes(b"")
    with pytest.raises(IsADirectoryError):
        os.rename(mnt / "f", mnt / "d")
    assert (mnt / "d").is_dir()
    assert (mnt / "f").is_file()


def test_rename_dir_into_own_subdir_is_einval(mnt: Path) -> None:
    (mnt / "a" / "b").mkdir(parents=True)
    with pytest.raises(OSError) as info:
        os.rename(mnt / "a", mnt / "a" / "b" / "c")
    assert info.value.errno == errno.EINVAL
    with pytest.raises(OSError) as info:
        os.rename(mnt / "a", mnt / "a" / "c")
    assert info.value.errno == errno.EINVAL
    assert (mnt / "a" / "b").is_dir()


def test_rename_missing_source_is_enoent(mnt: Path) -> None:
    with pytest.raises(FileNotFoundError):
        os.rename(mnt / "missing", mnt / "x")
    os.mkdir(mnt / "d")
    with pytest.raises(FileNotFoundError):
        os.rename(mnt / "d" / "missing", mnt / "x")


def test_rename_into_missing_dir_is_enoent(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    with pytest.raises(FileNotFoundError):
        os.rename(mnt / "f", mnt / "nodir" / "f")
    assert (mnt / "f").exists()


def test_rename_symlink_moves_link_not_target(mnt: Path) -> None:
    (mnt / "t").write_bytes(b"t")
    os.symlink("t", mnt / "l")
    os.rename(mnt / "l", mnt / "l2")
    assert os.readlink(mnt / "l2") == "t"
    assert (mnt / "t").exists()


def test_rename_then_create_old_name(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"first")
    os.rename(mnt / "a", mnt / "b")
    (mnt / "a").write_bytes(b"second")
    assert (mnt / "a").read_bytes() == b"second"
    assert (mnt / "b").read_bytes() == b"first"


def test_rename_chain_swap_via_temp(mnt: Path) -> None:
    (mnt / "x").write_bytes(b"X")
    (mnt / "y").write_bytes(b"Y")
    os.rename(mnt / "x", mnt / "tmp")
    os.rename(mnt / "y", mnt / "x")
    os.rename(mnt / "tmp", mnt / "y")
    assert (mnt / "x").read_bytes() == b"Y"
    assert (mnt / "y").read_bytes() == b"X"


def test_atomic_replace_pattern(mnt: Path) -> None:
    """write tmp, fsync, rename over: what checkpoint writers do."""
    final = mnt / "ckpt.bin"
    final.write_bytes(b"v0")
    for version in range(1, 6):
        tmp = mnt / f".ckpt.bin.tmp{version}"
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, f"v{version}".encode() * 1000)
        os.fsync(fd)
        os.close(fd)
        os.replace(tmp, final)
        assert final.read_bytes() == f"v{version}".encode() * 1000
    assert os.listdir(mnt) == ["ckpt.bin"]


# --- renameat2 ------------------------------------------------------------------


def test_noreplace_moves_when_target_missing(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"a")
    renameat2(mnt / "a", mnt / "b", RENAME_NOREPLACE)
    assert (mnt / "b").read_bytes() == b"a"
    assert not (mnt / "a").exists()


def test_noreplace_on_existing_target_is_eexist(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"a")
    (mnt / "b").write_bytes(b"b")
    with pytest.raises(OSError) as info:
        renameat2(mnt / "a", mnt / "b", RENAME_NOREPLACE)
    assert info.value.errno == errno.EEXIST
    assert (mnt / "a").read_bytes() == b"a"
    assert (mnt / "b").read_bytes() == b"b"


def test_noreplace_dir_on_existing_empty_dir_is_eexist(mnt: Path) -> None:
    os.mkdir(mnt / "a")
    os.mkdir(mnt / "b")
    with pytest.raises(OSError) as info:
        renameat2(mnt / "a", mnt / "b", RENAME_NOREPLACE)
    assert info.value.errno == errno.EEXIST


def test_exchange_swaps_two_files(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"AAAA")
    (mnt / "b").write_bytes(b"BB")
    ino_a, ino_b = os.stat(mnt / "a").st_ino, os.stat(mnt / "b").st_ino
    renameat2(mnt / "a", mnt / "b", RENAME_EXCHANGE)
    assert (mnt / "a").read_bytes() == b"BB"
    assert (mnt / "b").read_bytes() == b"AAAA"
    assert os.stat(mnt / "a").st_ino == ino_b
    assert os.stat(mnt / "b").st_ino == ino_a
    assert os.stat(mnt / "a").st_size == 2


def test_exchange_file_and_dir_across_parents(mnt: Path) -> None:
    os.mkdir(mnt / "p1")
    os.mkdir(mnt / "p2")
    (mnt / "p1" / "f").write_bytes(b"file")
    os.mkdir(mnt / "p2" / "d")
    (mnt / "p2" / "d" / "inner").write_bytes(b"inner")
    renameat2(mnt / "p1" / "f", mnt / "p2" / "d", RENAME_EXCHANGE)
    assert (mnt / "p1" / "f").is_dir()
    assert (mnt / "p1" / "f" / "inner").read_bytes() == b"inner"
    assert (mnt / "p2" / "d").read_bytes() == b"file"
    assert os.stat(mnt / "p1").st_nlink == 3
    assert os.stat(mnt / "p2").st_nlink == 2
    assert os.stat(f"{mnt}/p1/f/..").st_ino == os.stat(mnt / "p1").st_ino


def test_exchange_with_missing_target_is_enoent(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"a")
    with pytest.raises(FileNotFoundError):
        renameat2(mnt / "a", mnt / "missing", RENAME_EXCHANGE)
    assert (mnt / "a").read_bytes() == b"a"


def test_exchange_and_noreplace_together_is_einval(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"a")
    (mnt / "b").write_bytes(b"b")
    with pytest.raises(OSError) as info:
        renameat2(mnt / "a", mnt / "b", RENAME_EXCHANGE | RENAME_NOREPLACE)
    assert info.value.errno == errno.EINVAL


def test_exchange_keeps_open_fds_with_their_files(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"A")
    (mnt / "b").write_bytes(b"B")
    fd = os.open(mnt / "a", os.O_RDWR)
    try:
        renameat2(mnt / "a", mnt / "b", RENAME_EXCHANGE)
        os.pwrite(fd, b"!", 1)
    finally:
        os.close(fd)
    assert (mnt / "b").read_bytes() == b"A!"
    assert (mnt / "a").read_bytes() == b"B"


def test_rename_keeps_mode_and_owner(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"")
    os.chmod(mnt / "a", 0o751)
    os.chown(mnt / "a", 1000, 1000)
    os.rename(mnt / "a", mnt / "b")
    st = os.stat(mnt / "b")
    assert stat.S_IMODE(st.st_mode) == 0o751
    assert (st.st_uid, st.st_gid) == (1000, 1000)


# --- cross-device -------------------------------------------------------------------

_PLAIN = os.environ.get("CLOUDFS_TEST_PLAIN") == "1"


@pytest.mark.skipif(_PLAIN, reason="the plain directory shares a filesystem with tmp_path")
def test_rename_out_of_mount_is_exdev(mnt: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (mnt / "f").write_bytes(b"x")
    with pytest.raises(OSError) as info:
        os.rename(mnt / "f", outside / "f")
    assert info.value.errno == errno.EXDEV
    (outside / "g").write_bytes(b"y")
    with pytest.raises(OSError) as info:
        os.rename(outside / "g", mnt / "g")
    assert info.value.errno == errno.EXDEV
    with pytest.raises(OSError) as info:
        os.link(mnt / "f", outside / "hard")
    assert info.value.errno == errno.EXDEV
    assert (mnt / "f").read_bytes() == b"x"
