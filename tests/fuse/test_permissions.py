"""Permission checks as non-root users (the mount uses allow_other + default_permissions).

Every child process enters ``area`` as root before it drops to the test user and
then uses relative names, so the directories above ``mnt`` (pytest's 0700
``/tmp/pytest-of-root``) never need to be searchable by that user.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from testkit.users import ALICE, BOB, NOBODY, User, errno_as, errno_name, run_as, run_code_as


@pytest.fixture
def area(mnt: Path) -> Path:
    """A root-owned 0755 directory inside the mount."""
    path = mnt / "area"
    path.mkdir()
    os.chmod(path, 0o755)
    return path


def make_file(path: Path, mode: int, owner: User | None = None, data: bytes = b"secret") -> Path:
    path.write_bytes(data)
    os.chmod(path, mode)
    if owner is not None:
        os.chown(path, owner.uid, owner.gid)
        os.chmod(path, mode)  # chown may have cleared set-id bits
    return path


def make_dir(path: Path, mode: int, owner: User | None = None) -> Path:
    path.mkdir()
    if owner is not None:
        os.chown(path, owner.uid, owner.gid)
    os.chmod(path, mode)
    return path


def expect(code: int, user: User, area: Path, fn: Callable[..., object], *args: object) -> None:
    got = errno_as(user, fn, *args, cwd=area)
    assert errno_name(got) == errno_name(code)


def read_file(name: str) -> bytes:
    with open(name, "rb") as f:
        return f.read()


def append_file(name: str, data: bytes) -> None:
    with open(name, "ab") as f:
        f.write(data)


def create_file(name: str) -> None:
    os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))


# --- read, write, create ----------------------------------------------------------


def test_read_of_0600_root_file_is_eacces(area: Path) -> None:
    make_file(area / "secret", 0o600)
    expect(errno.EACCES, ALICE, area, read_file, "secret")
    expect(errno.EACCES, ALICE, area, os.open, "secret", os.O_RDONLY)


def test_read_of_0644_root_file_works(area: Path) -> None:
    make_file(area / "public", 0o644, data=b"hello")
    assert run_as(ALICE, read_file, "public", cwd=area).unwrap() == b"hello"


def test_write_of_0444_file_is_eacces(area: Path) -> None:
    make_file(area / "ro", 0o444)
    make_file(area / "ro_own", 0o444, owner=ALICE)
    for name in ("ro", "ro_own"):
        expect(errno.EACCES, ALICE, area, os.open, name, os.O_WRONLY)
        expect(errno.EACCES, ALICE, area, os.open, name, os.O_RDWR)
        expect(errno.EACCES, ALICE, area, os.open, name, os.O_RDONLY | os.O_TRUNC)
        expect(errno.EACCES, ALICE, area, os.truncate, name, 0)
    assert (area / "ro").read_bytes() == b"secret"
    assert (area / "ro_own").read_bytes() == b"secret"


def test_owner_can_write_own_0644_file(area: Path) -> None:
    make_file(area / "mine", 0o644, owner=ALICE)
    run_as(ALICE, append_file, "mine", b"+more", cwd=area).unwrap()
    assert (area / "mine").read_bytes() == b"secret+more"
    expect(errno.EACCES, BOB, area, append_file, "mine", b"bob")


def test_create_in_root_owned_0755_dir_is_eacces(area: Path) -> None:
    expect(errno.EACCES, ALICE, area, create_file, "new")
    expect(errno.EACCES, ALICE, area, os.mkdir, "newdir")
    expect(errno.EACCES, ALICE, area, os.symlink, "x", "newlink")
    expect(errno.EACCES, ALICE, area, os.mkfifo, "newfifo")
    assert os.listdir(area) == []


def test_unlink_and_rename_in_root_owned_0755_dir_is_eacces(area: Path) -> None:
    make_file(area / "f", 0o666, owner=ALICE)
    expect(errno.EACCES, ALICE, area, os.unlink, "f")
    expect(errno.EACCES, ALICE, area, os.rename, "f", "g")
    assert (area / "f").exists()


def test_create_in_dir_owned_by_user_works_and_sets_owner(area: Path) -> None:
    make_dir(area / "home", 0o755, owner=ALICE)
    run_as(ALICE, create_file, "home/new", cwd=area).unwrap()
    run_as(ALICE, os.mkdir, "home/sub", cwd=area).unwrap()
    for name in ("new", "sub"):
        st = os.stat(area / "home" / name)
        assert (st.st_uid, st.st_gid) == (ALICE.uid, ALICE.gid)


def test_search_permission_needed_to_reach_files(area: Path) -> None:
    make_dir(area / "closed", 0o700)
    make_file(area / "closed" / "f", 0o644)
    expect(errno.EACCES, ALICE, area, os.stat, "closed/f")
    expect(errno.EACCES, ALICE, area, os.listdir, "closed")
    make_dir(area / "traverse_only", 0o711)
    make_file(area / "traverse_only" / "f", 0o644, data=b"known name")
    assert run_as(ALICE, read_file, "traverse_only/f", cwd=area).unwrap() == b"known name"
    expect(errno.EACCES, ALICE, area, os.listdir, "traverse_only")
    make_dir(area / "list_only", 0o744)
    make_file(area / "list_only" / "f", 0o644)
    assert run_as(ALICE, os.listdir, "list_only", cwd=area).unwrap() == ["f"]
    expect(errno.EACCES, ALICE, area, os.stat, "list_only/f")


def test_group_class_takes_precedence_over_other(area: Path) -> None:
    """A member of the file's group gets the group bits even when other has more."""
    make_file(area / "f", 0o604)
    os.chown(area / "f", 0, ALICE.gid)
    expect(errno.EACCES, ALICE, area, read_file, "f")
    assert run_as(BOB, read_file, "f", cwd=area).unwrap() == b"secret"
    os.chmod(area / "f", 0o640)
    assert run_as(ALICE, read_file, "f", cwd=area).unwrap() == b"secret"
    expect(errno.EACCES, BOB, area, read_file, "f")


def test_owner_class_takes_precedence_over_group_and_other(area: Path) -> None:
    make_file(area / "f", 0o077, owner=ALICE)
    expect(errno.EACCES, ALICE, area, read_file, "f")
    assert run_as(BOB, read_file, "f", cwd=area).unwrap() == b"secret"


# --- chmod, chown, utime by non-owners -------------------------------------------


def test_chmod_by_non_owner_is_eperm(area: Path) -> None:
    make_file(area / "f", 0o666)
    expect(errno.EPERM, ALICE, area, os.chmod, "f", 0o777)
    assert stat.S_IMODE(os.stat(area / "f").st_mode) == 0o666


def test_chmod_by_owner_works(area: Path) -> None:
    make_file(area / "f", 0o644, owner=ALICE)
    run_as(ALICE, os.chmod, "f", 0o600, cwd=area).unwrap()
    assert stat.S_IMODE(os.stat(area / "f").st_mode) == 0o600


def test_chown_by_non_owner_is_eperm(area: Path) -> None:
    make_file(area / "f", 0o666)
    expect(errno.EPERM, ALICE, area, os.chown, "f", ALICE.uid, ALICE.gid)
    st = os.stat(area / "f")
    assert (st.st_uid, st.st_gid) == (0, 0)


def test_chown_own_file_to_other_user_is_eperm(area: Path) -> None:
    make_file(area / "f", 0o644, owner=ALICE)
    expect(errno.EPERM, ALICE, area, os.chown, "f", BOB.uid, -1)
    expect(errno.EPERM, ALICE, area, os.chown, "f", -1, BOB.gid)
    # a no-op chown to oneself is allowed
    run_as(ALICE, os.chown, "f", ALICE.uid, ALICE.gid, cwd=area).unwrap()
    st = os.stat(area / "f")
    assert (st.st_uid, st.st_gid) == (ALICE.uid, ALICE.gid)


def test_utime_explicit_times_by_non_owner_is_eperm(area: Path) -> None:
    make_file(area / "f", 0o666)
    expect(errno.EPERM, ALICE, area, os.utime, "f", (1.0, 2.0))


def test_utime_now_needs_write_permission_only(area: Path) -> None:
    make_file(area / "rw", 0o666)
    os.utime(area / "rw", ns=(1_000_000_000, 1_000_000_000))
    run_as(ALICE, os.utime, "rw", None, cwd=area).unwrap()
    assert os.stat(area / "rw").st_mtime_ns > 1_000_000_000
    make_file(area / "ro", 0o644)
    expect(errno.EACCES, ALICE, area, os.utime, "ro", None)


def test_xattr_needs_write_permission(area: Path) -> None:
    make_file(area / "ro", 0o644)
    expect(errno.EACCES, ALICE, area, os.setxattr, "ro", "user.k", b"v")
    make_file(area / "rw", 0o666)
    run_as(ALICE, os.setxattr, "rw", "user.k", b"v", cwd=area).unwrap()
    assert os.getxattr(area / "rw", "user.k") == b"v"
    make_file(area / "secret", 0o600)
    os.setxattr(area / "secret", "user.k", b"v")
    expect(errno.EACCES, ALICE, area, os.getxattr, "secret", "user.k")


# --- set-id bits --------------------------------------------------------------------


def test_write_by_non_root_owner_clears_setuid(area: Path) -> None:
    make_file(area / "prog", 0o4755, owner=ALICE)
    assert stat.S_IMODE(os.stat(area / "prog").st_mode) == 0o4755
    run_as(ALICE, append_file, "prog", b"patched", cwd=area).unwrap()
    assert stat.S_IMODE(os.stat(area / "prog").st_mode) == 0o755


def test_truncate_by_non_root_owner_clears_setuid(area: Path) -> None:
    make_file(area / "prog", 0o4755, owner=ALICE)
    run_as(ALICE, os.truncate, "prog", 1, cwd=area).unwrap()
    assert stat.S_IMODE(os.stat(area / "prog").st_mode) == 0o755


def test_setgid_directory_passes_group_on(area: Path) -> None:
    make_dir(area / "shared", 0o2777)
    os.chown(area / "shared", 0, 4242)
    os.chmod(area / "shared", 0o2777)
    (area / "shared" / "by_root").write_bytes(b"")
    run_as(ALICE, create_file, "shared/by_alice", cwd=area).unwrap()
    run_as(ALICE, os.mkdir, "shared/subdir", 0o755, cwd=area).unwrap()
    run_as(ALICE, os.symlink, "by_alice", "shared/link", cwd=area).unwrap()
    assert os.stat(area / "shared" / "by_root").st_gid == 4242
    assert os.lstat(area / "shared" / "link").st_gid == 4242
    st = os.stat(area / "shared" / "by_alice")
    assert (st.st_uid, st.st_gid) == (ALICE.uid, 4242)
    st = os.stat(area / "shared" / "subdir")
    assert st.st_gid == 4242
    assert st.st_mode & stat.S_ISGID


# --- sticky directories ---------------------------------------------------------------


@pytest.fixture
def sticky(area: Path) -> Path:
    """A root-owned 1777 directory holding one file of ALICE's and one of BOB's."""
    path = make_dir(area / "tmp", 0o1777)
    run_as(ALICE, create_file, "tmp/alice", cwd=area).unwrap()
    run_as(BOB, create_file, "tmp/bob", cwd=area).unwrap()
    return path


def test_sticky_dir_user_cannot_unlink_others_file(area: Path, sticky: Path) -> None:
    expect(errno.EPERM, ALICE, area, os.unlink, "tmp/bob")
    assert (sticky / "bob").exists()


def test_sticky_dir_user_cannot_rename_others_file(area: Path, sticky: Path) -> None:
    expect(errno.EPERM, ALICE, area, os.rename, "tmp/bob", "tmp/stolen")
    assert (sticky / "bob").exists()
    assert not (sticky / "stolen").exists()


def test_sticky_dir_user_cannot_replace_others_file_by_rename(area: Path, sticky: Path) -> None:
    expect(errno.EPERM, ALICE, area, os.rename, "tmp/alice", "tmp/bob")
    assert os.stat(sticky / "bob").st_uid == BOB.uid


def test_sticky_dir_user_can_unlink_and_rename_own_file(area: Path, sticky: Path) -> None:
    run_as(ALICE, os.rename, "tmp/alice", "tmp/alice2", cwd=area).unwrap()
    run_as(ALICE, os.unlink, "tmp/alice2", cwd=area).unwrap()
    assert os.listdir(sticky) == ["bob"]


def test_sticky_dir_user_cannot_rmdir_others_dir(area: Path, sticky: Path) -> None:
    run_as(BOB, os.mkdir, "tmp/bobdir", cwd=area).unwrap()
    expect(errno.EPERM, ALICE, area, os.rmdir, "tmp/bobdir")
    assert (sticky / "bobdir").is_dir()


def test_sticky_dir_owner_and_root_can_unlink_anything(area: Path) -> None:
    make_dir(area / "tmp", 0o1777, owner=ALICE)
    run_as(BOB, create_file, "tmp/bob", cwd=area).unwrap()
    run_as(ALICE, os.unlink, "tmp/bob", cwd=area).unwrap()
    run_as(BOB, create_file, "tmp/bob2", cwd=area).unwrap()
    os.unlink(area / "tmp" / "bob2")
    assert os.listdir(area / "tmp") == []


def test_non_sticky_world_writable_dir_allows_unlink_of_others_file(area: Path) -> None:
    make_dir(area / "open", 0o777)
    run_as(BOB, create_file, "open/bob", cwd=area).unwrap()
    run_as(ALICE, os.unlink, "open/bob", cwd=area).unwrap()
    assert os.listdir(area / "open") == []


# --- access() as a user ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "owner", "expected"),
    [
        (0o700, ALICE, (True, True, True)),
        (0o500, ALICE, (True, False, True)),
        (0o070, ALICE, (False, False, False)),
        (0o604, None, (True, False, False)),
        (0o602, None, (False, True, False)),
        (0o601, None, (False, False, True)),
        (0o000, None, (False, False, False)),
    ],
)
def test_access_as_user(
    area: Path, mode: int, owner: User | None, expected: tuple[bool, bool, bool]
) -> None:
    make_file(area / "f", mode, owner=owner)

    def probe() -> tuple[bool, bool, bool]:
        return (os.access("f", os.R_OK), os.access("f", os.W_OK), os.access("f", os.X_OK))

    assert run_as(ALICE, probe, cwd=area).unwrap() == expected
    assert run_as(ALICE, os.access, "f", os.F_OK, cwd=area).unwrap() is True


def test_access_of_directory_as_user(area: Path) -> None:
    make_dir(area / "d", 0o751)
    make_dir(area / "d" / "inner", 0o755)

    def probe() -> tuple[bool, bool, bool, bool]:
        return (
            os.access("d", os.R_OK),
            os.access("d", os.W_OK),
            os.access("d", os.X_OK),
            os.access("d/inner", os.R_OK | os.X_OK),
        )

    assert run_as(ALICE, probe, cwd=area).unwrap() == (False, False, True, True)


def test_code_string_as_nobody(area: Path) -> None:
    make_file(area / "secret", 0o600)
    make_file(area / "open", 0o644, data=b"readable")
    code = (
        "import os\n"
        "ids = (os.getuid(), os.getgid(), os.getgroups())\n"
        "data = open('open', 'rb').read()\n"
        "try:\n"
        "    open('secret', 'rb')\n"
        "    denied = 0\n"
        "except PermissionError as e:\n"
        "    denied = e.errno\n"
        "result = (ids, data, denied)\n"
    )
    outcome = run_code_as(NOBODY, code, cwd=area)
    assert outcome.unwrap() == ((NOBODY.uid, NOBODY.gid, []), b"readable", errno.EACCES)
    assert run_code_as(NOBODY, "open('secret', 'rb')", cwd=area).errno == errno.EACCES
