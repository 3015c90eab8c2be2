"""Which operations update atime, mtime and ctime, of a file and of its parent directory.

POSIX "marks for update" the times an operation changes. To see a change, each
test first moves atime/mtime far into the past (utime), then waits one clock
tick so that a new ctime is strictly later than the recorded one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

OLD_NS = 1_000_000_000_000_000_000  # 2001-09-09
TICK_S = 0.05  # longer than the kernel's coarse clock step and any sane FUSE granularity


@dataclass(frozen=True)
class Times:
    atime: int
    mtime: int
    ctime: int


def times_of(path: Path, *, follow: bool = True) -> Times:
    st = os.stat(path, follow_symlinks=follow)
    return Times(st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns)


def age(*paths: Path) -> dict[Path, Times]:
    """Set atime/mtime to OLD_NS, wait a tick, and return each path's times."""
    for path in paths:
        os.utime(path, ns=(OLD_NS, OLD_NS))
    time.sleep(TICK_S)
    return {path: times_of(path) for path in paths}


def assert_modified(before: Times, after: Times) -> None:
    assert after.mtime > before.mtime, "mtime not updated"
    assert after.ctime > before.ctime, "ctime not updated"


def assert_changed_only(before: Times, after: Times) -> None:
    assert after.mtime == before.mtime, "mtime must not change"
    assert after.ctime > before.ctime, "ctime not updated"


# --- the file itself -----------------------------------------------------------


def test_write_updates_mtime_and_ctime_not_atime(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"abc")
    before = age(f)[f]
    fd = os.open(f, os.O_WRONLY)
    try:
        os.write(fd, b"X")
        during = times_of(f)
    finally:
        os.close(fd)
    after = times_of(f)
    assert_modified(before, during)
    assert_modified(before, after)
    assert after.atime == OLD_NS


def test_pwrite_at_offset_updates_mtime(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"abc")
    before = age(f)[f]
    fd = os.open(f, os.O_WRONLY)
    try:
        os.pwrite(fd, b"tail", 1000)
        fd_after = os.fstat(fd)
    finally:
        os.close(fd)
    assert fd_after.st_mtime_ns > before.mtime
    assert_modified(before, times_of(f))


def test_truncate_updates_mtime_and_ctime(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"abcdef")
    before = age(f)[f]
    os.truncate(f, 2)
    assert_modified(before, times_of(f))
    before = age(f)[f]
    fd = os.open(f, os.O_WRONLY)
    try:
        os.ftruncate(fd, 100)
    finally:
        os.close(fd)
    assert_modified(before, times_of(f))


def test_open_o_trunc_updates_mtime_and_ctime(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"abcdef")
    before = age(f)[f]
    os.close(os.open(f, os.O_WRONLY | os.O_TRUNC))
    assert_modified(before, times_of(f))


def test_read_does_not_change_mtime_or_ctime(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"abc")
    before = age(f)[f]
    assert f.read_bytes() == b"abc"
    after = times_of(f)
    assert after.mtime == before.mtime
    assert after.ctime == before.ctime


def test_chmod_updates_ctime_only(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    before = age(f)[f]
    os.chmod(f, 0o600)
    after = times_of(f)
    assert_changed_only(before, after)
    assert after.atime == OLD_NS


def test_chown_updates_ctime_only(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    before = age(f)[f]
    os.chown(f, 1000, 1000)
    assert_changed_only(before, times_of(f))


def test_link_updates_file_ctime_only(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    before = age(f)[f]
    os.link(f, mnt / "g")
    assert_changed_only(before, times_of(f))


def test_unlink_of_one_link_updates_ctime_of_the_other(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    os.link(f, mnt / "g")
    before = age(f)[f]
    os.unlink(mnt / "g")
    assert_changed_only(before, times_of(f))


def test_utime_sets_atime_mtime_and_updates_ctime(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    before = age(f)[f]
    os.utime(f, ns=(123_000_000_456, 789_000_000_012))
    after = times_of(f)
    assert after.atime == 123_000_000_456
    assert after.mtime == 789_000_000_012
    assert after.ctime > before.ctime


def test_atime_is_settable_independently(mnt: Path) -> None:
    f = mnt / "f"
    f.write_bytes(b"")
    os.utime(f, ns=(OLD_NS, OLD_NS + 5))
    os.utime(f, ns=(OLD_NS + 7, OLD_NS + 5))
    after = times_of(f)
    assert after.atime == OLD_NS + 7
    assert after.mtime == OLD_NS + 5


def test_new_file_times_are_now(mnt: Path) -> None:
    before = time.time_ns() - 100_000_000
    (mnt / "f").write_bytes(b"")
    after = time.time_ns() + 100_000_000
    t = times_of(mnt / "f")
    for ts in (t.atime, t.mtime, t.ctime):
        assert before <= ts <= after


def test_mtime_set_by_utime_is_not_overwritten_by_later_flush(mnt: Path) -> None:
    f = mnt / "f"
    fd = os.open(f, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, b"data")
        os.fsync(fd)
        os.utime(fd, ns=(OLD_NS, OLD_NS))
    finally:
        os.close(fd)
    time.sleep(TICK_S)
    assert times_of(f).mtime == OLD_NS


# --- the parent directory -------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "dir", "symlink", "fifo", "hardlink"])
def test_create_in_dir_updates_dir_mtime_and_ctime(mnt: Path, kind: str) -> None:
    os.mkdir(mnt / "d")
    (mnt / "src").write_bytes(b"")
    before = age(mnt / "d")[mnt / "d"]
    target = mnt / "d" / "new"
    if kind == "file":
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    elif kind == "dir":
        os.mkdir(target)
    elif kind == "symlink":
        os.symlink("anything", target)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        os.link(mnt / "src", target)
    assert_modified(before, times_of(mnt / "d"))


def test_open_existing_file_does_not_touch_dir(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    (mnt / "d" / "f").write_bytes(b"")
    before = age(mnt / "d")[mnt / "d"]
    os.close(os.open(mnt / "d" / "f", os.O_CREAT | os.O_RDWR, 0o644))
    after = times_of(mnt / "d")
    assert after.mtime == before.mtime
    assert after.ctime == before.ctime


def test_write_to_file_does_not_touch_dir(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    (mnt / "d" / "f").write_bytes(b"")
    before = age(mnt / "d")[mnt / "d"]
    (mnt / "d" / "f").write_bytes(b"more data")
    after = times_of(mnt / "d")
    assert after.mtime == before.mtime
    assert after.ctime == before.ctime


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_remove_from_dir_updates_dir_mtime_and_ctime(mnt: Path, kind: str) -> None:
    os.mkdir(mnt / "d")
    if kind == "file":
        (mnt / "d" / "x").write_bytes(b"")
    else:
        os.mkdir(mnt / "d" / "x")
    before = age(mnt / "d")[mnt / "d"]
    if kind == "file":
        os.unlink(mnt / "d" / "x")
    else:
        os.rmdir(mnt / "d" / "x")
    assert_modified(before, times_of(mnt / "d"))


def test_rename_across_dirs_updates_both_dirs(mnt: Path) -> None:
    os.mkdir(mnt / "src")
    os.mkdir(mnt / "dst")
    (mnt / "src" / "f").write_bytes(b"")
    before = age(mnt / "src", mnt / "dst")
    os.rename(mnt / "src" / "f", mnt / "dst" / "g")
    assert_modified(before[mnt / "src"], times_of(mnt / "src"))
    assert_modified(before[mnt / "dst"], times_of(mnt / "dst"))


def test_rename_within_dir_updates_dir(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    (mnt / "d" / "a").write_bytes(b"")
    before = age(mnt / "d")[mnt / "d"]
    os.rename(mnt / "d" / "a", mnt / "d" / "b")
    assert_modified(before, times_of(mnt / "d"))


def test_rename_over_existing_updates_dirs(mnt: Path) -> None:
    os.mkdir(mnt / "src")
    os.mkdir(mnt / "dst")
    (mnt / "src" / "f").write_bytes(b"")
    (mnt / "dst" / "f").write_bytes(b"old")
    before = age(mnt / "src", mnt / "dst")
    os.rename(mnt / "src" / "f", mnt / "dst" / "f")
    assert_modified(before[mnt / "src"], times_of(mnt / "src"))
    assert_modified(before[mnt / "dst"], times_of(mnt / "dst"))


def test_rename_does_not_change_file_mtime(mnt: Path) -> None:
    (mnt / "a").write_bytes(b"")
    before = age(mnt / "a")[mnt / "a"]
    os.rename(mnt / "a", mnt / "b")
    after = times_of(mnt / "b")
    assert after.mtime == before.mtime
    assert after.atime == before.atime


def test_chmod_of_child_does_not_touch_dir(mnt: Path) -> None:
    os.mkdir(mnt / "d")
    (mnt / "d" / "f").write_bytes(b"")
    before = age(mnt / "d")[mnt / "d"]
    os.chmod(mnt / "d" / "f", 0o600)
    after = times_of(mnt / "d")
    assert after.mtime == before.mtime
    assert after.ctime == before.ctime
