"""A read-only mount (--read-only, -o ro) refuses every change with EROFS; reads work."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from testkit.mounts import Backing
from tests.fuse.conftest import MountFactory

PRE = {"a.txt": b"alpha", "d/b.bin": os.urandom(100_000), "d/e/c.txt": b"gamma"}


def _open_close(path: Path, flags: int) -> None:
    fd = os.open(path, flags, 0o644)
    os.close(fd)


def mutations(r: Path) -> dict[str, Callable[[], object]]:
    return {
        "create": lambda: _open_close(r / "new.txt", os.O_CREAT | os.O_WRONLY),
        "create-excl": lambda: _open_close(r / "d/new.txt", os.O_CREAT | os.O_EXCL | os.O_RDWR),
        "open-wronly": lambda: _open_close(r / "a.txt", os.O_WRONLY),
        "open-rdwr": lambda: _open_close(r / "a.txt", os.O_RDWR),
        "open-append": lambda: _open_close(r / "a.txt", os.O_WRONLY | os.O_APPEND),
        "open-trunc": lambda: _open_close(r / "a.txt", os.O_WRONLY | os.O_TRUNC),
        "mkdir": lambda: os.mkdir(r / "newdir"),
        "rmdir": lambda: os.rmdir(r / "d/e"),
        "unlink": lambda: os.unlink(r / "a.txt"),
        "rename": lambda: os.rename(r / "a.txt", r / "z.txt"),
        "rename-dir": lambda: os.rename(r / "d", r / "dd"),
        "chmod": lambda: os.chmod(r / "a.txt", 0o600),
        "chown": lambda: os.chown(r / "a.txt", 1, 1),
        "utime": lambda: os.utime(r / "a.txt", (1, 1)),
        "setxattr": lambda: os.setxattr(r / "a.txt", "user.k", b"v"),
        "removexattr": lambda: os.removexattr(r / "a.txt", "user.k"),
        "truncate": lambda: os.truncate(r / "a.txt", 0),
        "symlink": lambda: os.symlink("a.txt", r / "ln"),
        "link": lambda: os.link(r / "a.txt", r / "hl"),
        "mkfifo": lambda: os.mkfifo(r / "fifo"),
    }


def not_refused(r: Path) -> list[str]:
    """Each mutation under ``r`` that did not fail with EROFS, and how it ended."""
    failures = []
    for name, op in mutations(r).items():
        try:
            op()
        except OSError as e:
            if e.errno != errno.EROFS:
                failures.append(f"{name}: {errno.errorcode.get(e.errno)} instead of EROFS")
        else:
            failures.append(f"{name}: succeeded")
    return failures


@pytest.mark.parametrize("options", [("--read-only",), ("-o", "ro")], ids=["flag", "o-ro"])
def test_read_only_mount_refuses_changes(
    backing: Backing, mount_factory: MountFactory, options: tuple[str, ...]
) -> None:
    for key, data in PRE.items():
        backing.write_object(key, data)
    with mount_factory(*options) as m:
        r = m.root
        for key, data in PRE.items():
            assert (r / key).read_bytes() == data
        failures = not_refused(r)
        # still all there, unchanged, and reads still work after the refusals
        assert sorted(os.listdir(r)) == ["a.txt", "d"]
        assert sorted(os.listdir(r / "d")) == ["b.bin", "e"]
        for key, data in PRE.items():
            assert (r / key).read_bytes() == data
        st = os.statvfs(r)
        assert st.f_flag & os.ST_RDONLY
    assert not failures, failures
    assert backing.keys() == set(PRE)
    for key, data in PRE.items():
        assert backing.read_object(key) == data
