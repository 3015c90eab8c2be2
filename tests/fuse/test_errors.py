"""Exact errno for failing operations, and that a failed operation changes nothing.

Each case builds a small tree, runs one call that must fail, checks the errno
(Linux's choice where POSIX allows several) and then that the tree is unchanged.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

NAME_255 = "n" * 255
NAME_256 = "n" * 256


def tree(root: Path) -> None:
    """f: file with data, d: empty dir, full: dir with one file, l: symlink to f."""
    (root / "f").write_bytes(b"data")
    (root / "d").mkdir()
    (root / "full").mkdir()
    (root / "full" / "x").write_bytes(b"x")
    os.symlink("f", root / "l")


def snapshot(root: Path) -> dict[str, tuple[int, int, bytes | str | None]]:
    """Every path below root with (mode, nlink, content or link target)."""
    result: dict[str, tuple[int, int, bytes | str | None]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            content: bytes | str | None = None
            if os.path.islink(path):
                content = os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    content = f.read()
            result[os.path.relpath(path, root)] = (st.st_mode, st.st_nlink, content)
    return result


def open_(path: str | Path, flags: int) -> None:
    os.close(os.open(path, flags, 0o644))


@dataclass(frozen=True)
class Case:
    id: str
    op: Callable[[Path], object]
    code: int


CASES = [
    # ENOENT
    Case("stat-missing", lambda r: os.stat(r / "missing"), errno.ENOENT),
    Case("lstat-missing", lambda r: os.lstat(r / "missing"), errno.ENOENT),
    Case("open-missing", lambda r: open_(r / "missing", os.O_RDONLY), errno.ENOENT),
    Case("open-missing-wr", lambda r: open_(r / "missing", os.O_WRONLY), errno.ENOENT),
    Case(
        "create-in-missing-dir",
        lambda r: open_(r / "nodir" / "f", os.O_CREAT | os.O_WRONLY),
        errno.ENOENT,
    ),
    Case("mkdir-in-missing-dir", lambda r: os.mkdir(r / "nodir" / "d"), errno.ENOENT),
    Case("unlink-missing", lambda r: os.unlink(r / "missing"), errno.ENOENT),
    Case("unlink-in-missing-dir", lambda r: os.unlink(r / "nodir" / "f"), errno.ENOENT),
    Case("rmdir-missing", lambda r: os.rmdir(r / "missing"), errno.ENOENT),
    Case("listdir-missing", lambda r: os.listdir(r / "missing"), errno.ENOENT),
    Case("readlink-missing", lambda r: os.readlink(r / "missing"), errno.ENOENT),
    Case("truncate-missing", lambda r: os.truncate(r / "missing", 0), errno.ENOENT),
    Case("chown-missing", lambda r: os.chown(r / "missing", 1, 1), errno.ENOENT),
    Case("rename-missing", lambda r: os.rename(r / "missing", r / "y"), errno.ENOENT),
    Case("link-missing", lambda r: os.link(r / "missing", r / "y"), errno.ENOENT),
    Case("symlink-in-missing-dir", lambda r: os.symlink("f", r / "nodir" / "s"), errno.ENOENT),
    Case("open-dangling-symlink", lambda r: open_(r / "dangling", os.O_RDONLY), errno.ENOENT),
    # EEXIST
    Case("mkdir-existing-dir", lambda r: os.mkdir(r / "d"), errno.EEXIST),
    Case("mkdir-existing-file", lambda r: os.mkdir(r / "f"), errno.EEXIST),
    Case("mkdir-existing-symlink", lambda r: os.mkdir(r / "l"), errno.EEXIST),
    Case(
        "o-excl-existing",
        lambda r: open_(r / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY),
        errno.EEXIST,
    ),
    Case(
        "o-excl-existing-dir",
        lambda r: open_(r / "d", os.O_CREAT | os.O_EXCL | os.O_WRONLY),
        errno.EEXIST,
    ),
    Case("link-onto-existing", lambda r: os.link(r / "f", r / "full" / "x"), errno.EEXIST),
    Case("link-onto-dir", lambda r: os.link(r / "f", r / "d"), errno.EEXIST),
    Case("symlink-onto-existing", lambda r: os.symlink("t", r / "f"), errno.EEXIST),
    Case("symlink-onto-dir", lambda r: os.symlink("t", r / "d"), errno.EEXIST),
    Case("mkfifo-existing", lambda r: os.mkfifo(r / "f"), errno.EEXIST),
    # ENOTEMPTY
    Case("rmdir-non-empty", lambda r: os.rmdir(r / "full"), errno.ENOTEMPTY),
    Case("rename-dir-over-non-empty", lambda r: os.rename(r / "d", r / "full"), errno.ENOTEMPTY),
    # ENOTDIR
    Case("stat-through-file", lambda r: os.stat(r / "f" / "x"), errno.ENOTDIR),
    Case(
        "create-through-file",
        lambda r: open_(r / "f" / "x", os.O_CREAT | os.O_WRONLY),
        errno.ENOTDIR,
    ),
    Case("mkdir-through-file", lambda r: os.mkdir(r / "f" / "x"), errno.ENOTDIR),
    Case("open-file-with-slash", lambda r: open_(f"{r}/f/", os.O_RDONLY), errno.ENOTDIR),
    Case("listdir-file", lambda r: os.listdir(r / "f"), errno.ENOTDIR),
    Case("rmdir-file", lambda r: os.rmdir(r / "f"), errno.ENOTDIR),
    Case("rmdir-symlink", lambda r: os.rmdir(r / "l"), errno.ENOTDIR),
    Case("rename-dir-over-file", lambda r: os.rename(r / "d", r / "f"), errno.ENOTDIR),
    Case("rename-file-to-slash", lambda r: os.rename(r / "f", f"{r}/g/"), errno.ENOTDIR),
    Case(
        "open-o-directory-file",
        lambda r: open_(r / "f", os.O_RDONLY | os.O_DIRECTORY),
        errno.ENOTDIR,
    ),
    # EISDIR
    Case("open-dir-wronly", lambda r: open_(r / "d", os.O_WRONLY), errno.EISDIR),
    Case("open-dir-rdwr", lambda r: open_(r / "d", os.O_RDWR), errno.EISDIR),
    Case("open-dir-creat", lambda r: open_(r / "d", os.O_CREAT | os.O_WRONLY), errno.EISDIR),
    Case("open-dir-trunc", lambda r: open_(r / "d", os.O_RDONLY | os.O_TRUNC), errno.EISDIR),
    Case("unlink-dir", lambda r: os.unlink(r / "d"), errno.EISDIR),
    Case("rename-file-over-dir", lambda r: os.rename(r / "f", r / "d"), errno.EISDIR),
    Case("truncate-dir", lambda r: os.truncate(r / "d", 0), errno.EISDIR),
    # ENAMETOOLONG
    Case("stat-256", lambda r: os.stat(r / NAME_256), errno.ENAMETOOLONG),
    Case("create-256", lambda r: open_(r / NAME_256, os.O_CREAT | os.O_WRONLY), errno.ENAMETOOLONG),
    Case("mkdir-256", lambda r: os.mkdir(r / NAME_256), errno.ENAMETOOLONG),
    Case("symlink-256", lambda r: os.symlink("f", r / NAME_256), errno.ENAMETOOLONG),
    Case("link-256", lambda r: os.link(r / "f", r / NAME_256), errno.ENAMETOOLONG),
    Case("rename-to-256", lambda r: os.rename(r / "f", r / NAME_256), errno.ENAMETOOLONG),
    Case("mkfifo-256", lambda r: os.mkfifo(r / NAME_256), errno.ENAMETOOLONG),
    Case("unlink-256", lambda r: os.unlink(r / NAME_256), errno.ENAMETOOLONG),
    Case("path-over-path-max", lambda r: os.stat(r / ("a/" * 2100)), errno.ENAMETOOLONG),
    # EINVAL
    Case(
        "rename-dir-into-own-child", lambda r: os.rename(r / "full", r / "full" / "y"), errno.EINVAL
    ),
    Case("rename-dir-into-self", lambda r: os.rename(r / "d", r / "d" / "y"), errno.EINVAL),
    Case("rmdir-dot", lambda r: os.rmdir(f"{r}/d/."), errno.EINVAL),
    Case("readlink-file", lambda r: os.readlink(r / "f"), errno.EINVAL),
    # EPERM
    Case("link-dir", lambda r: os.link(r / "d", r / "d2"), errno.EPERM),
    # ELOOP
    Case(
        "open-nofollow-symlink", lambda r: open_(r / "l", os.O_RDONLY | os.O_NOFOLLOW), errno.ELOOP
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_errno(mnt: Path, case: Case) -> None:
    tree(mnt)
    os.symlink("missing-target", mnt / "dangling")
    before = snapshot(mnt)
    with pytest.raises(OSError) as info:
        case.op(mnt)
    got = info.value.errno
    assert got == case.code, (
        f"{case.id}: {errno.errorcode.get(got or 0)} != {errno.errorcode[case.code]}"
    )
    assert snapshot(mnt) == before, f"{case.id} changed the tree"


def test_255_byte_names_work_everywhere(mnt: Path) -> None:
    (mnt / NAME_255).write_bytes(b"long")
    assert (mnt / NAME_255).read_bytes() == b"long"
    assert NAME_255 in os.listdir(mnt)
    d = mnt / ("d" * 255)
    os.mkdir(d)
    os.symlink("x" * 255, d / ("s" * 255))
    os.link(mnt / NAME_255, d / ("h" * 255))
    os.rename(mnt / NAME_255, d / ("r" * 255))
    assert sorted(os.listdir(d)) == sorted(["s" * 255, "h" * 255, "r" * 255])
    assert os.stat(d / ("r" * 255)).st_nlink == 2
    assert os.readlink(d / ("s" * 255)) == "x" * 255
    os.setxattr(d / ("r" * 255), "user.k", b"v")


def test_255_byte_multibyte_name(mnt: Path) -> None:
    name = "é" * 127 + "x"  # 2 * 127 + 1 = 255 bytes
    assert len(os.fsencode(name)) == 255
    (mnt / name).write_bytes(b"ok")
    assert os.listdir(mnt) == [name]
    too_long = "é" * 128  # 256 bytes
    with pytest.raises(OSError) as info:
        (mnt / too_long).write_bytes(b"no")
    assert info.value.errno == errno.ENAMETOOLONG


def test_failed_create_leaves_nothing(mnt: Path) -> None:
    with pytest.raises(OSError):
        os.open(mnt / NAME_256, os.O_CREAT | os.O_WRONLY, 0o644)
    with pytest.raises(FileNotFoundError):
        os.open(mnt / "nodir" / "f", os.O_CREAT | os.O_WRONLY, 0o644)
    assert os.listdir(mnt) == []
