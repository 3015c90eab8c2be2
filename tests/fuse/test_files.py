"""Regular files through the mount: create, open flags, read/write, truncate, sync, unlink."""

from __future__ import annotations

import errno
import os
import random
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def opened(path: Path, flags: int, mode: int = 0o644) -> Iterator[int]:
    fd = os.open(path, flags, mode)
    try:
        yield fd
    finally:
        os.close(fd)


def read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# --- create and open flags -------------------------------------------------


def test_create_makes_empty_regular_file_with_mode(mnt: Path) -> None:
    path = mnt / "new"
    old = os.umask(0)
    try:
        with opened(path, os.O_CREAT | os.O_WRONLY, 0o640):
            pass
    finally:
        os.umask(old)
    st = os.stat(path)
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert st.st_size == 0
    assert st.st_nlink == 1
    assert st.st_uid == os.getuid()
    assert st.st_gid == os.getgid()


def test_create_honours_umask(mnt: Path) -> None:
    old = os.umask(0o027)
    try:
        with opened(mnt / "masked", os.O_CREAT | os.O_WRONLY, 0o666):
            pass
        os.mkdir(mnt / "masked_dir", 0o777)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(mnt / "masked").st_mode) == 0o640
    assert stat.S_IMODE(os.stat(mnt / "masked_dir").st_mode) == 0o750


def test_create_then_lookup_by_name(mnt: Path) -> None:
    (mnt / "a.txt").write_bytes(b"hello")
    assert (mnt / "a.txt").exists()
    assert os.listdir(mnt) == ["a.txt"]
    assert (mnt / "a.txt").read_bytes() == b"hello"


def test_open_creat_on_existing_keeps_content(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"keep me")
    with opened(path, os.O_CREAT | os.O_RDWR) as fd:
        assert read_all(fd) == b"keep me"
    assert path.read_bytes() == b"keep me"


def test_o_excl_creates_when_missing(mnt: Path) -> None:
    with opened(mnt / "x", os.O_CREAT | os.O_EXCL | os.O_WRONLY) as fd:
        write_all(fd, b"1")
    assert (mnt / "x").read_bytes() == b"1"


def test_o_excl_on_existing_is_eexist_and_leaves_file(mnt: Path) -> None:
    path = mnt / "x"
    path.write_bytes(b"orig")
    with pytest.raises(FileExistsError) as info:
        os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    assert info.value.errno == errno.EEXIST
    assert path.read_bytes() == b"orig"


def test_o_excl_on_dangling_symlink_is_eexist(mnt: Path) -> None:
    os.symlink("nowhere", mnt / "dangling")
    with pytest.raises(FileExistsError):
        os.open(mnt / "dangling", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    assert not (mnt / "nowhere").exists()


def test_o_creat_through_dangling_symlink_creates_target(mnt: Path) -> None:
    os.symlink("target", mnt / "link")
    with opened(mnt / "link", os.O_CREAT | os.O_WRONLY) as fd:
        write_all(fd, b"via link")
    assert (mnt / "target").read_bytes() == b"via link"
    assert os.path.islink(mnt / "link")


def test_o_trunc_empties_file(mnt: Path) -> None:
    path = mnt / "t"
    path.write_bytes(b"x" * 10000)
    with opened(path, os.O_WRONLY | os.O_TRUNC) as fd:
        assert os.fstat(fd).st_size == 0
    assert os.stat(path).st_size == 0
    assert path.read_bytes() == b""


def test_o_trunc_then_write_shorter_content(mnt: Path) -> None:
    path = mnt / "t"
    path.write_bytes(b"a long original content")
    with opened(path, os.O_RDWR | os.O_TRUNC) as fd:
        write_all(fd, b"short")
        os.lseek(fd, 0, os.SEEK_SET)
        assert read_all(fd) == b"short"
    assert path.read_bytes() == b"short"


def test_o_append_writes_land_at_end_even_after_lseek(mnt: Path) -> None:
    path = mnt / "log"
    path.write_bytes(b"start:")
    with opened(path, os.O_WRONLY | os.O_APPEND) as fd:
        os.lseek(fd, 0, os.SEEK_SET)
        write_all(fd, b"one;")
        os.lseek(fd, 2, os.SEEK_SET)
        write_all(fd, b"two;")
        assert os.lseek(fd, 0, os.SEEK_CUR) == len(b"start:one;two;")
    assert path.read_bytes() == b"start:one;two;"


def test_o_append_sees_growth_by_other_fd(mnt: Path) -> None:
    path = mnt / "log"
    with (
        opened(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND) as app,
        opened(path, os.O_WRONLY) as plain,
    ):
        write_all(app, b"A")
        os.pwrite(plain, b"BBBB", 1)
        write_all(app, b"C")
    assert path.read_bytes() == b"ABBBBC"


def test_o_append_rdwr_reads_from_offset(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"0123456789")
    with opened(path, os.O_RDWR | os.O_APPEND) as fd:
        assert os.read(fd, 3) == b"012"
        write_all(fd, b"X")
        assert os.pread(fd, 100, 0) == b"0123456789X"


def test_rdonly_fd_rejects_write(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"data")
    with opened(path, os.O_RDONLY) as fd:
        assert os.read(fd, 10) == b"data"
        with pytest.raises(OSError) as info:
            os.write(fd, b"x")
        assert info.value.errno == errno.EBADF
    assert path.read_bytes() == b"data"


def test_wronly_fd_rejects_read(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"data")
    with opened(path, os.O_WRONLY) as fd:
        with pytest.raises(OSError) as info:
            os.read(fd, 10)
        assert info.value.errno == errno.EBADF
        write_all(fd, b"DA")
    assert path.read_bytes() == b"DAta"


def test_rdwr_read_and_write_share_offset(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"abcdefgh")
    with opened(path, os.O_RDWR) as fd:
        assert os.read(fd, 2) == b"ab"
        write_all(fd, b"XY")
        assert os.read(fd, 2) == b"ef"
        assert os.lseek(fd, 0, os.SEEK_CUR) == 6
    assert path.read_bytes() == b"abXYefgh"


# --- read and write --------------------------------------------------------


def test_read_at_and_past_eof(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"12345")
    with opened(path, os.O_RDONLY) as fd:
        assert os.read(fd, 100) == b"12345"
        assert os.read(fd, 100) == b""
        assert os.pread(fd, 10, 5) == b""
        assert os.pread(fd, 10, 1000) == b""
        assert os.pread(fd, 10, 3) == b"45"


def test_write_past_eof_leaves_zero_hole(mnt: Path) -> None:
    path = mnt / "sparse"
    with opened(path, os.O_CREAT | os.O_RDWR) as fd:
        os.pwrite(fd, b"end", 100_000)
        assert os.fstat(fd).st_size == 100_003
    data = path.read_bytes()
    assert len(data) == 100_003
    assert data[:100_000] == bytes(100_000)
    assert data[100_000:] == b"end"


def test_lseek_seek_end_and_write_extends(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"abc")
    with opened(path, os.O_RDWR) as fd:
        assert os.lseek(fd, 0, os.SEEK_END) == 3
        assert os.lseek(fd, 2, os.SEEK_END) == 5
        write_all(fd, b"Z")
    assert path.read_bytes() == b"abc\0\0Z"


def test_overwrite_in_middle(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"a" * 100)
    with opened(path, os.O_WRONLY) as fd:
        os.pwrite(fd, b"BBB", 50)
    data = path.read_bytes()
    assert data == b"a" * 50 + b"BBB" + b"a" * 47


def test_pwrite_pread_random_offsets_match_model(mnt: Path) -> None:
    rng = random.Random(1234)
    path = mnt / "random"
    model = bytearray()
    with opened(path, os.O_CREAT | os.O_RDWR) as fd:
        for _ in range(300):
            off = rng.randrange(0, 300_000)
            data = rng.randbytes(rng.randrange(1, 5000))
            assert os.pwrite(fd, data, off) == len(data)
            if len(model) < off + len(data):
                model.extend(bytes(off + len(data) - len(model)))
            model[off : off + len(data)] = data
            roff = rng.randrange(0, len(model) + 100)
            rlen = rng.randrange(0, 8000)
            assert os.pread(fd, rlen, roff) == bytes(model[roff : roff + rlen])
        assert os.fstat(fd).st_size == len(model)
    assert path.read_bytes() == bytes(model)


def test_pwrite_does_not_move_file_offset(mnt: Path) -> None:
    path = mnt / "f"
    with opened(path, os.O_CREAT | os.O_RDWR) as fd:
        write_all(fd, b"abc")
        os.pwrite(fd, b"ZZ", 10)
        assert os.lseek(fd, 0, os.SEEK_CUR) == 3
        os.pread(fd, 5, 0)
        assert os.lseek(fd, 0, os.SEEK_CUR) == 3


def test_write_visible_to_other_fd_before_close(mnt: Path) -> None:
    path = mnt / "shared"
    with opened(path, os.O_CREAT | os.O_WRONLY) as w, opened(path, os.O_RDONLY) as r:
        write_all(w, b"first")
        assert os.pread(r, 100, 0) == b"first"
        os.pwrite(w, b"F", 0)
        assert os.pread(r, 100, 0) == b"First"
        assert os.fstat(r).st_size == 5


def test_size_visible_by_stat_while_open(mnt: Path) -> None:
    path = mnt / "f"
    with opened(path, os.O_CREAT | os.O_WRONLY) as fd:
        write_all(fd, b"x" * 12345)
        assert os.stat(path).st_size == 12345
        assert os.fstat(fd).st_size == 12345


def test_empty_write_changes_nothing(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"abc")
    with opened(path, os.O_WRONLY) as fd:
        assert os.write(fd, b"") == 0
    assert path.read_bytes() == b"abc"


def test_binary_data_round_trips(mnt: Path) -> None:
    data = bytes(range(256)) * 1000
    (mnt / "bin").write_bytes(data)
    assert (mnt / "bin").read_bytes() == data


def test_rewrite_file_many_times(mnt: Path) -> None:
    path = mnt / "f"
    for i in range(50):
        content = f"version {i}\n".encode() * (i + 1)
        path.write_bytes(content)
        assert path.read_bytes() == content
    assert os.stat(path).st_size == len(b"version 49\n") * 50


# --- truncate ---------------------------------------------------------------


def test_truncate_path_shrink_and_grow(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"0123456789")
    os.truncate(path, 4)
    assert os.stat(path).st_size == 4
    assert path.read_bytes() == b"0123"
    os.truncate(path, 8)
    assert path.read_bytes() == b"0123\0\0\0\0"
    os.truncate(path, 0)
    assert path.read_bytes() == b""


def test_ftruncate_on_open_fd(mnt: Path) -> None:
    path = mnt / "f"
    with opened(path, os.O_CREAT | os.O_RDWR) as fd:
        write_all(fd, b"abcdefghij")
        os.ftruncate(fd, 3)
        assert os.fstat(fd).st_size == 3
        assert os.pread(fd, 100, 0) == b"abc"
        # the offset is not moved: the next write leaves a hole
        write_all(fd, b"Z")
        assert os.pread(fd, 100, 0) == b"abc" + bytes(7) + b"Z"
    assert os.stat(path).st_size == 11


def test_truncate_shrink_then_grow_reads_zeroes_not_old_bytes(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"\xff" * 9000)
    with opened(path, os.O_RDWR) as fd:
        os.ftruncate(fd, 10)
        os.ftruncate(fd, 9000)
        assert os.pread(fd, 9000, 0) == b"\xff" * 10 + bytes(8990)
    assert path.read_bytes() == b"\xff" * 10 + bytes(8990)


def test_truncate_large_sparse_size(mnt: Path) -> None:
    path = mnt / "big"
    path.write_bytes(b"")
    size = 64 * (1 << 20) + 3  # many 4 MiB blocks, none of them written
    os.truncate(path, size)
    assert os.stat(path).st_size == size
    with opened(path, os.O_RDONLY) as fd:
        assert os.pread(fd, 16, size - 8) == bytes(8)
        assert os.pread(fd, 16, (4 << 20) - 8) == bytes(16)
    os.truncate(path, 0)
    assert os.stat(path).st_size == 0


def test_ftruncate_on_rdonly_fd_is_einval_or_ebadf(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"abc")
    with opened(path, os.O_RDONLY) as fd, pytest.raises(OSError) as info:
        os.ftruncate(fd, 0)
    # Linux: EINVAL (POSIX allows EBADF or EINVAL)
    assert info.value.errno in (errno.EINVAL, errno.EBADF)
    assert path.read_bytes() == b"abc"


def test_truncate_negative_is_einval(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"abc")
    with pytest.raises(OSError) as info:
        os.truncate(path, -1)
    assert info.value.errno == errno.EINVAL


def test_truncate_directory_is_eisdir(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    with pytest.raises(IsADirectoryError):
        os.truncate(mnt / "d", 0)


# --- flush, fsync, close ----------------------------------------------------


def test_fsync_and_fdatasync_succeed_and_keep_data(mnt: Path) -> None:
    path = mnt / "synced"
    with opened(path, os.O_CREAT | os.O_RDWR) as fd:
        write_all(fd, b"durable")
        os.fsync(fd)
        os.fdatasync(fd)
        write_all(fd, b"!")
        os.fsync(fd)
    assert path.read_bytes() == b"durable!"


def test_fsync_on_rdonly_fd_and_directory(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"x")
    with opened(path, os.O_RDONLY) as fd:
        os.fsync(fd)
    with opened(mnt, os.O_RDONLY | os.O_DIRECTORY) as dfd:
        os.fsync(dfd)


def test_dup_fds_flush_once_each(mnt: Path) -> None:
    path = mnt / "f"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    fd2 = os.dup(fd)
    write_all(fd, b"ab")
    os.close(fd)
    write_all(fd2, b"cd")
    os.close(fd2)
    assert path.read_bytes() == b"abcd"


def test_close_twice_is_ebadf(mnt: Path) -> None:
    fd = os.open(mnt / "f", os.O_CREAT | os.O_WRONLY, 0o644)
    os.close(fd)
    with pytest.raises(OSError) as info:
        os.close(fd)
    assert info.value.errno == errno.EBADF


def test_many_open_handles_on_one_file(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"x" * 100)
    fds = [os.open(path, os.O_RDWR) for _ in range(64)]
    try:
        for i, fd in enumerate(fds):
            os.pwrite(fd, bytes([i]), i)
        for fd in fds:
            assert os.pread(fd, 64, 0) == bytes(range(64))
    finally:
        for fd in fds:
            os.close(fd)
    assert path.read_bytes()[:64] == bytes(range(64))


# --- unlink ------------------------------------------------------------------


def test_unlink_removes_name(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"x")
    os.unlink(path)
    assert not path.exists()
    assert os.listdir(mnt) == []
    with pytest.raises(FileNotFoundError):
        os.stat(path)


def test_recreate_after_unlink_is_fresh(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"old content that is long")
    os.unlink(path)
    path.write_bytes(b"new")
    assert path.read_bytes() == b"new"
    assert os.stat(path).st_size == 3


def test_unlinked_open_file_stays_readable_and_writable(mnt: Path) -> None:
    path = mnt / "ghost"
    path.write_bytes(b"still here")
    fd = os.open(path, os.O_RDWR)
    try:
        os.unlink(path)
        assert not path.exists()
        assert os.listdir(mnt) == []
        st = os.fstat(fd)
        assert st.st_nlink == 0
        assert st.st_size == 10
        assert os.pread(fd, 100, 0) == b"still here"
        os.pwrite(fd, b"!" * 5, 10)
        assert os.pread(fd, 100, 0) == b"still here!!!!!"
        os.ftruncate(fd, 5)
        assert os.pread(fd, 100, 0) == b"still"
        assert os.fstat(fd).st_size == 5
        os.fsync(fd)
    finally:
        os.close(fd)
    assert not path.exists()


def test_unlinked_file_is_independent_of_new_file_with_same_name(mnt: Path) -> None:
    path = mnt / "name"
    path.write_bytes(b"old")
    fd = os.open(path, os.O_RDONLY)
    try:
        os.unlink(path)
        path.write_bytes(b"brand new")
        assert os.pread(fd, 100, 0) == b"old"
        assert os.fstat(fd).st_nlink == 0
        assert os.stat(path).st_nlink == 1
    finally:
        os.close(fd)
    assert path.read_bytes() == b"brand new"


def test_unlinked_file_survives_until_last_of_several_fds(mnt: Path) -> None:
    path = mnt / "f"
    path.write_bytes(b"abc")
    fd1 = os.open(path, os.O_RDONLY)
    fd2 = os.open(path, os.O_WRONLY)
    os.unlink(path)
    os.close(fd1)
    try:
        os.pwrite(fd2, b"Z", 0)
        fd3 = os.open(f"/proc/self/fd/{fd2}", os.O_RDONLY)
        try:
            assert os.read(fd3, 10) == b"Zbc"
        finally:
            os.close(fd3)
    finally:
        os.close(fd2)


def test_unlink_one_of_two_links_while_open(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"shared")
    os.link(mnt / "a", mnt / "b")
    with opened(mnt / "a", os.O_RDWR) as fd:
        os.unlink(mnt / "a")
        assert os.fstat(fd).st_nlink == 1
        os.pwrite(fd, b"S", 0)
    assert (mnt / "b").read_bytes() == b"Shared"
