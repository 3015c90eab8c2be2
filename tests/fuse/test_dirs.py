"""Directories through the mount: mkdir, rmdir, lookup, readdir with d_type and stat."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest


def test_mkdir_creates_directory(mnt: Path) -> None:
    os.mkdir(mnt / "d", 0o755)
    st = os.stat(mnt / "d")
    assert stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o755
    assert st.st_nlink == 2
    assert st.st_uid == os.getuid()
    assert os.listdir(mnt / "d") == []


def test_mkdir_mode_is_masked_by_umask(mnt: Path) -> None:
    old = os.umask(0o077)
    try:
        os.mkdir(mnt / "private", 0o777)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(mnt / "private").st_mode) == 0o700


def test_mkdir_keeps_sticky_bit(mnt: Path) -> None:
    old = os.umask(0)
    try:
        os.mkdir(mnt / "tmpdir", 0o1777)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(mnt / "tmpdir").st_mode) == 0o1777


def test_nested_mkdir_and_lookup(mnt: Path) -> None:
    deep = mnt.joinpath(*[f"level{i}" for i in range(20)])
    deep.mkdir(parents=True)
    (deep / "leaf").write_bytes(b"deep")
    assert (deep / "leaf").read_bytes() == b"deep"
    assert os.path.isdir(mnt / "level0" / "level1")


def test_dir_nlink_counts_subdirectories(mnt: Path) -> None:
    os.mkdir(mnt / "p")
    assert os.stat(mnt / "p").st_nlink == 2
    os.mkdir(mnt / "p" / "a")
    os.mkdir(mnt / "p" / "b")
    (mnt / "p" / "file").write_bytes(b"")
    assert os.stat(mnt / "p").st_nlink == 4
    os.rmdir(mnt / "p" / "a")
    assert os.stat(mnt / "p").st_nlink == 3
    os.rename(mnt / "p" / "b", mnt / "b")
    assert os.stat(mnt / "p").st_nlink == 2


def test_rmdir_removes_empty_directory(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    os.rmdir(mnt / "d")
    assert not (mnt / "d").exists()
    assert os.listdir(mnt) == []


def test_rmdir_after_emptying(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    (mnt / "d" / "f").write_bytes(b"x")
    os.mkdir(mnt / "d" / "sub")
    os.unlink(mnt / "d" / "f")
    os.rmdir(mnt / "d" / "sub")
    os.rmdir(mnt / "d")
    assert not (mnt / "d").exists()


def test_rmdir_dot_is_einval(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    with pytest.raises(OSError) as info:
        os.rmdir(f"{mnt}/d/.")  # pathlib would drop the "."
    assert info.value.errno == errno.EINVAL


def test_rmdir_dotdot_is_enotempty_or_ebusy(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    with pytest.raises(OSError) as info:
        os.rmdir(mnt / "d" / "..")
    assert info.value.errno in (errno.ENOTEMPTY, errno.EBUSY, errno.EEXIST)


def test_opened_directory_survives_rmdir(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    fd = os.open(mnt / "d", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rmdir(mnt / "d")
        st = os.fstat(fd)
        assert stat.S_ISDIR(st.st_mode)
        assert os.listdir(fd) == []
        with pytest.raises(FileNotFoundError):
            os.open("new", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
    finally:
        os.close(fd)


def test_recreate_directory_after_rmdir(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    (mnt / "d" / "old").write_bytes(b"")
    os.unlink(mnt / "d" / "old")
    os.rmdir(mnt / "d")
    os.mkdir(mnt / "d")
    assert os.listdir(mnt / "d") == []


def test_dot_and_dotdot_lookup(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    os.mkdir(mnt / "d" / "e")
    assert os.stat(f"{mnt}/d/.").st_ino == os.stat(mnt / "d").st_ino
    assert os.stat(mnt / "d" / "e" / "..").st_ino == os.stat(mnt / "d").st_ino
    assert os.path.samefile(mnt / "d" / "e" / ".." / "..", mnt)


# --- readdir ---------------------------------------------------------------


def _populate(root: Path) -> None:
    os.mkdir(root / "sub")
    (root / "file").write_bytes(b"12345")
    os.symlink("file", root / "link")
    os.symlink("missing", root / "dangling")
    os.mkfifo(root / "fifo")


def test_listdir_returns_exact_names_without_dots(mnt: Path) -> None:
    _populate(mnt)
    assert sorted(os.listdir(mnt)) == ["dangling", "fifo", "file", "link", "sub"]


def test_listdir_bytes_path(mnt: Path) -> None:
    _populate(mnt)
    assert sorted(os.listdir(os.fsencode(mnt))) == [b"dangling", b"fifo", b"file", b"link", b"sub"]


def test_scandir_d_type_matches_lstat(mnt: Path) -> None:
    _populate(mnt)
    kinds = {}
    with os.scandir(mnt) as entries:
        for entry in entries:
            kinds[entry.name] = (
                entry.is_dir(follow_symlinks=False),
                entry.is_file(follow_symlinks=False),
                entry.is_symlink(),
            )
            st = os.lstat(entry.path)
            assert entry.inode() == st.st_ino
            est = entry.stat(follow_symlinks=False)
            assert est.st_mode == st.st_mode
            assert est.st_ino == st.st_ino
            assert est.st_size == st.st_size
    assert kinds == {
        "sub": (True, False, False),
        "file": (False, True, False),
        "link": (False, False, True),
        "dangling": (False, False, True),
        "fifo": (False, False, False),
    }


def test_scandir_follows_symlinks_when_asked(mnt: Path) -> None:
    _populate(mnt)
    with os.scandir(mnt) as it:
        entries = {e.name: e for e in it}
    assert entries["link"].is_file()
    assert entries["link"].stat().st_size == 5
    assert not entries["dangling"].is_file()
    with pytest.raises(FileNotFoundError):
        entries["dangling"].stat()


def test_readdir_of_empty_dir(mnt: Path) -> None:
    os.mkdir(mnt / "empty")
    assert os.listdir(mnt / "empty") == []
    with os.scandir(mnt / "empty") as it:
        assert list(it) == []


def test_readdir_via_fd(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    (mnt / "d" / "x").write_bytes(b"")
    fd = os.open(mnt / "d", os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert os.listdir(fd) == ["x"]
        with os.scandir(fd) as it:
            assert [e.name for e in it] == ["x"]
    finally:
        os.close(fd)


def test_readdir_reflects_changes_between_listings(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    assert os.listdir(mnt / "d") == []
    (mnt / "d" / "a").write_bytes(b"")
    assert os.listdir(mnt / "d") == ["a"]
    os.rename(mnt / "d" / "a", mnt / "d" / "b")
    assert os.listdir(mnt / "d") == ["b"]
    os.unlink(mnt / "d" / "b")
    assert os.listdir(mnt / "d") == []


def test_readdir_many_entries_exactly_once(mnt: Path) -> None:
    names = {f"entry-{i:04d}-{'x' * (i % 200)}" for i in range(600)}
    for name in names:
        (mnt / name).write_bytes(b"")
    listed = os.listdir(mnt)
    assert len(listed) == len(names)
    assert set(listed) == names


def test_readdir_while_unlinking_sees_every_entry(mnt: Path) -> None:
    """The rm -rf pattern: unlink each entry right after readdir returns it.

    POSIX leaves entries added or removed during the listing unspecified, but
    every entry that is neither must be returned exactly once, so the loop must
    leave the directory empty.
    """
    names = {f"f{i:04d}" for i in range(800)}
    for name in names:
        (mnt / name).write_bytes(b"")
    seen: list[str] = []
    with os.scandir(mnt) as it:
        for entry in it:
            seen.append(entry.name)
            os.unlink(entry.path)
    assert sorted(seen) == sorted(names)
    assert os.listdir(mnt) == []


def test_scandir_inodes_are_unique(mnt: Path) -> None:
    for i in range(50):
        (mnt / f"f{i}").write_bytes(b"")
        os.mkdir(mnt / f"d{i}")
    with os.scandir(mnt) as it:
        inodes = [e.inode() for e in it]
    assert len(set(inodes)) == 100


def test_directory_fd_rejects_read_and_write(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    fd = os.open(mnt / "d", os.O_RDONLY)
    try:
        with pytest.raises(IsADirectoryError):
            os.read(fd, 10)
    finally:
        os.close(fd)


def test_o_directory_on_file_is_enotdir(mnt: Path) -> None:
    (mnt / "f").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        os.open(mnt / "f", os.O_RDONLY | os.O_DIRECTORY)


def test_walk_tree(mnt: Path) -> None:
    expected_files = set()
    for a in range(3):
        for b in range(3):
            d = mnt / f"a{a}" / f"b{b}"
            d.mkdir(parents=True)
            for c in range(3):
                (d / f"c{c}").write_bytes(f"{a}{b}{c}".encode())
                expected_files.add(f"a{a}/b{b}/c{c}")
    found = set()
    for dirpath, _dirnames, filenames in os.walk(mnt):
        for name in filenames:
            found.add(os.path.relpath(os.path.join(dirpath, name), mnt))
    assert found == expected_files
    assert (mnt / "a2" / "b1" / "c0").read_bytes() == b"210"
