"""Attributes through the mount: stat fields, chmod, chown, utime/utimensat, statfs, access."""

from __future__ import annotations

import ctypes
import os
import stat
import time
from pathlib import Path

import pytest

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc = ctypes.CDLL(None, use_errno=True)
_utimensat = _libc.utimensat
_utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(Timespec), ctypes.c_int]
_utimensat.restype = ctypes.c_int


def utimensat(path: Path, atime: tuple[int, int], mtime: tuple[int, int]) -> None:
    """utimensat(AT_FDCWD, path, [atime, mtime], 0) with raw (sec, nsec) pairs."""
    times = (Timespec * 2)(Timespec(*atime), Timespec(*mtime))
    if _utimensat(AT_FDCWD, os.fsencode(path), times, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(path))


# --- stat -----------------------------------------------------------------------


def test_stat_fields_of_new_file(mnt: Path) -> None:
    before = time.time_ns()
    (mnt / "f").write_bytes(b"x" * 100_000)
    st = os.stat(mnt / "f")
    assert stat.S_ISREG(st.st_mode)
    assert st.st_size == 100_000
    assert st.st_nlink == 1
    assert st.st_blksize > 0
    # written (not sparse) data occupies at least its size: du relies on st_blocks
    assert st.st_blocks * 512 >= 100_000
    assert st.st_ino > 0
    for ts in (st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns):
        assert before - 1_000_000_000 <= ts <= time.time_ns() + 1_000_000_000


def test_st_dev_is_shared_and_ino_is_stable(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"")
    os.mkdir(mnt / "d")
    st_a = os.stat(mnt / "a")
    assert st_a.st_dev == os.stat(mnt / "d").st_dev == os.stat(mnt).st_dev
    assert st_a.st_ino != os.stat(mnt / "d").st_ino
    assert os.stat(mnt / "a").st_ino == st_a.st_ino
    os.rename(mnt / "a", mnt / "d" / "a")
    assert os.stat(mnt / "d" / "a").st_ino == st_a.st_ino


def test_fstat_matches_stat(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"12345")
    fd = os.open(mnt / "f", os.O_RDONLY)
    try:
        a, b = os.fstat(fd), os.stat(mnt / "f")
        assert (a.st_ino, a.st_mode, a.st_size, a.st_nlink, a.st_uid, a.st_mtime_ns) == (
            b.st_ino,
            b.st_mode,
            b.st_size,
            b.st_nlink,
            b.st_uid,
            b.st_mtime_ns,
        )
    finally:
        os.close(fd)


def test_root_of_mount_is_a_directory(mnt: Path) -> None:
    st = os.stat(mnt)
    assert stat.S_ISDIR(st.st_mode)
    assert st.st_nlink >= 2


# --- chmod ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode", [0o000, 0o400, 0o644, 0o755, 0o777, 0o4755, 0o2755, 0o1777, 0o7777]
)
def test_chmod_file_sets_exact_mode(mnt: Path, mode: int) -> None:
    (mnt / "f").write_bytes(b"")
    os.chmod(mnt / "f", mode)
    st = os.stat(mnt / "f")
    assert stat.S_IMODE(st.st_mode) == mode
    assert stat.S_ISREG(st.st_mode)


def test_chmod_directory_keeps_type(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    os.chmod(mnt / "d", 0o1700)
    st = os.stat(mnt / "d")
    assert stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o1700


def test_fchmod_on_open_fd(mnt: Path) -> None:
    fd = os.open(mnt / "f", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.fchmod(fd, 0o600)
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600
        os.write(fd, b"still writable")
    finally:
        os.close(fd)
    assert stat.S_IMODE(os.stat(mnt / "f").st_mode) == 0o600
    assert (mnt / "f").read_bytes() == b"still writable"


def test_open_file_created_with_readonly_mode_is_writable_by_creator(mnt: Path) -> None:
    fd = os.open(mnt / "ro", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o444)
    try:
        os.write(fd, b"written through the creating fd")
    finally:
        os.close(fd)
    assert stat.S_IMODE(os.stat(mnt / "ro").st_mode) == 0o444
    assert (mnt / "ro").read_bytes() == b"written through the creating fd"


def test_chmod_missing_is_enoent(mnt: Path) -> None:
    with pytest.raises(FileNotFoundError):
        os.chmod(mnt / "missing", 0o644)


# --- chown -----------------------------------------------------------------------


def test_chown_sets_uid_and_gid(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    os.chown(mnt / "f", 1000, 2000)
    st = os.stat(mnt / "f")
    assert (st.st_uid, st.st_gid) == (1000, 2000)
    os.chown(mnt / "f", -1, 3000)
    st = os.stat(mnt / "f")
    assert (st.st_uid, st.st_gid) == (1000, 3000)
    os.chown(mnt / "f", 4000, -1)
    st = os.stat(mnt / "f")
    assert (st.st_uid, st.st_gid) == (4000, 3000)


def test_chown_minus_one_changes_nothing(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    os.chown(mnt / "f", 1000, 1000)
    os.chown(mnt / "f", -1, -1)
    st = os.stat(mnt / "f")
    assert (st.st_uid, st.st_gid) == (1000, 1000)


def test_fchown_and_directory_chown(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    os.chown(mnt / "d", 1000, 1000)
    st = os.stat(mnt / "d")
    assert (st.st_uid, st.st_gid) == (1000, 1000)
    fd = os.open(mnt / "f", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.fchown(fd, 65534, 65534)
    finally:
        os.close(fd)
    st = os.stat(mnt / "f")
    assert (st.st_uid, st.st_gid) == (65534, 65534)


def test_chown_clears_setuid_and_group_exec_setgid(mnt: Path) -> None:
    """Linux clears S_ISUID (and S_ISGID when group-executable) on chown, even for root."""
    (mnt / "f").write_bytes(b"")
    os.chmod(mnt / "f", 0o6755)
    os.chown(mnt / "f", 1000, 1000)
    assert stat.S_IMODE(os.stat(mnt / "f").st_mode) == 0o755


def test_chown_keeps_setgid_without_group_exec(mnt: Path) -> None:
    """S_ISGID without group-exec means mandatory locking, not set-group-id: it stays."""
    (mnt / "f").write_bytes(b"")
    os.chmod(mnt / "f", 0o2644)
    os.chown(mnt / "f", 1000, 1000)
    assert stat.S_IMODE(os.stat(mnt / "f").st_mode) == 0o2644


def test_chown_directory_keeps_setgid(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    os.chmod(mnt / "d", 0o2775)
    os.chown(mnt / "d", 1000, 1000)
    assert stat.S_IMODE(os.stat(mnt / "d").st_mode) == 0o2775


# --- utime / utimensat -------------------------------------------------------------


def test_utime_sets_exact_nanoseconds(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    atime = 1_234_567_890_123_456_789
    mtime = 1_600_000_000_987_654_321
    os.utime(mnt / "f", ns=(atime, mtime))
    st = os.stat(mnt / "f")
    assert st.st_atime_ns == atime
    assert st.st_mtime_ns == mtime


def test_utime_float_seconds(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    os.utime(mnt / "f", (1_000_000_000.5, 1_500_000_000.25))
    st = os.stat(mnt / "f")
    assert st.st_atime_ns == 1_000_000_000_500_000_000
    assert st.st_mtime_ns == 1_500_000_000_250_000_000


def test_utime_after_2038(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    far = 4_102_444_800_000_000_001  # 2100-01-01 plus 1 ns
    os.utime(mnt / "f", ns=(far, far))
    assert os.stat(mnt / "f").st_mtime_ns == far


def test_utime_before_1970(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    early = -86_400_000_000_000  # 1969-12-31
    os.utime(mnt / "f", ns=(early, early))
    st = os.stat(mnt / "f")
    assert st.st_mtime_ns == early
    assert st.st_atime_ns == early


def test_utime_none_sets_now(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    os.utime(mnt / "f", ns=(1_000_000_000, 1_000_000_000))
    before = time.time_ns()
    os.utime(mnt / "f", None)
    after = time.time_ns()
    st = os.stat(mnt / "f")
    slack = 100_000_000  # the kernel's coarse clock may lag time.time_ns() by a tick
    for ts in (st.st_atime_ns, st.st_mtime_ns):
        assert before - slack <= ts <= after + slack


def test_utimensat_utime_now_and_omit(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    os.utime(mnt / "f", ns=(1_000_000_000, 2_000_000_000))
    utimensat(mnt / "f", (0, UTIME_OMIT), (3, 5))
    st = os.stat(mnt / "f")
    assert st.st_atime_ns == 1_000_000_000
    assert st.st_mtime_ns == 3_000_000_005
    before = time.time_ns()
    utimensat(mnt / "f", (0, UTIME_NOW), (0, UTIME_OMIT))
    st = os.stat(mnt / "f")
    assert st.st_atime_ns >= before - 100_000_000
    assert st.st_mtime_ns == 3_000_000_005


def test_futimens_on_fd(mnt: Path) -> None:
    fd = os.open(mnt / "f", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.utime(fd, ns=(111_000_000_007, 222_000_000_009))
        st = os.fstat(fd)
    finally:
        os.close(fd)
    assert (st.st_atime_ns, st.st_mtime_ns) == (111_000_000_007, 222_000_000_009)
    st = os.stat(mnt / "f")
    assert (st.st_atime_ns, st.st_mtime_ns) == (111_000_000_007, 222_000_000_009)


def test_utime_directory(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    os.utime(mnt / "d", ns=(5_000_000_001, 6_000_000_002))
    st = os.stat(mnt / "d")
    assert (st.st_atime_ns, st.st_mtime_ns) == (5_000_000_001, 6_000_000_002)


def test_utime_missing_is_enoent(mnt: Path) -> None:
    with pytest.raises(FileNotFoundError):
        os.utime(mnt / "missing", None)


def test_mtime_survives_close_after_utime_on_open_fd(mnt: Path) -> None:
    """tar/rsync: write, set mtime through the path, close; the mtime must stick."""
    fd = os.open(mnt / "f", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, b"payload")
        os.utime(mnt / "f", ns=(7_000_000_000, 8_000_000_000))
    finally:
        os.close(fd)
    assert os.stat(mnt / "f").st_mtime_ns == 8_000_000_000
    assert (mnt / "f").read_bytes() == b"payload"


# --- statfs ------------------------------------------------------------------------


def test_statvfs_is_sane(mnt: Path) -> None:
    sv = os.statvfs(mnt)
    assert sv.f_namemax == 255
    assert sv.f_bsize > 0
    assert sv.f_frsize > 0
    assert sv.f_blocks > 0
    assert sv.f_blocks >= sv.f_bfree >= sv.f_bavail >= 0
    assert sv.f_files >= sv.f_ffree >= 0
    assert sv.f_favail >= 0


def test_fstatvfs_matches_statvfs_on_subpath(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    (mnt / "d" / "f").write_bytes(b"x")
    fd = os.open(mnt / "d" / "f", os.O_RDONLY)
    try:
        a = os.fstatvfs(fd)
    finally:
        os.close(fd)
    b = os.statvfs(mnt / "d")
    assert a.f_namemax == b.f_namemax == 255
    assert a.f_bsize == b.f_bsize
    assert a.f_frsize == b.f_frsize


# --- access ------------------------------------------------------------------------


def test_access_as_root(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    os.chmod(mnt / "f", 0o000)
    assert os.access(mnt / "f", os.F_OK)
    assert os.access(mnt / "f", os.R_OK | os.W_OK)
    assert not os.access(mnt / "f", os.X_OK)  # root needs at least one x bit
    os.chmod(mnt / "f", 0o010)
    assert os.access(mnt / "f", os.X_OK)
    os.mkdir(mnt / "d", 0o000)
    assert os.access(mnt / "d", os.R_OK | os.W_OK | os.X_OK)
    assert not os.access(mnt / "missing", os.F_OK)


def test_access_through_missing_or_file_component_is_false(mnt: Path) -> None:
    assert not os.access(mnt / "missing" / "deeper", os.R_OK)
    (mnt / "f").write_bytes(b"")
    assert not os.access(mnt / "f" / "below", os.F_OK)
