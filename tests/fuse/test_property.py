"""Random operation sequences applied to the mount and to a plain reference directory.

Hypothesis draws a list of operations over a few names (two files at the top,
one in a subdirectory, the subdirectory itself) and two open-file slots. Each
operation runs against the mount and against a directory on the local disk;
their results (data read, attributes, or errno) must be equal after every step,
and at the end both trees must hold the same names, contents, sizes, modes,
link counts and hard-link groups.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

BLOCK = 4 << 20
NAMES = ["a", "b", "d/c", "d", "e"]
FILE_NAMES = ["a", "b", "d/c", "e"]
SLOTS = [0, 1]
MODES = [0o644, 0o600, 0o755, 0o400, 0o000]
OPEN_FLAGS = [
    os.O_RDONLY,
    os.O_WRONLY,
    os.O_RDWR,
    os.O_RDWR | os.O_CREAT,
    os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    os.O_RDWR | os.O_CREAT | os.O_EXCL,
    os.O_WRONLY | os.O_APPEND,
    os.O_RDWR | os.O_CREAT | os.O_APPEND,
    os.O_RDWR | os.O_TRUNC,
]

Result = tuple[object, ...]


# --- operations ------------------------------------------------------------------


@dataclass(frozen=True)
class Open:
    slot: int
    name: str
    flags: int


@dataclass(frozen=True)
class Close:
    slot: int


@dataclass(frozen=True)
class Write:
    slot: int
    data: bytes


@dataclass(frozen=True)
class PWrite:
    slot: int
    offset: int
    data: bytes


@dataclass(frozen=True)
class Read:
    slot: int
    size: int


@dataclass(frozen=True)
class PRead:
    slot: int
    offset: int
    size: int


@dataclass(frozen=True)
class Seek:
    slot: int
    offset: int


@dataclass(frozen=True)
class FTruncate:
    slot: int
    size: int


@dataclass(frozen=True)
class FSync:
    slot: int


@dataclass(frozen=True)
class FStat:
    slot: int


@dataclass(frozen=True)
class Truncate:
    name: str
    size: int


@dataclass(frozen=True)
class Rename:
    src: str
    dst: str


@dataclass(frozen=True)
class Unlink:
    name: str


@dataclass(frozen=True)
class Link:
    src: str
    dst: str


@dataclass(frozen=True)
class Chmod:
    name: str
    mode: int


@dataclass(frozen=True)
class ReadFile:
    name: str


@dataclass(frozen=True)
class Stat:
    name: str


@dataclass(frozen=True)
class Mkdir:
    name: str


@dataclass(frozen=True)
class Rmdir:
    name: str


Op: TypeAlias = (
    Open | Close | Write | PWrite | Read | PRead | Seek | FTruncate | FSync | FStat
    | Truncate | Rename | Unlink | Link | Chmod | ReadFile | Stat | Mkdir | Rmdir
)  # fmt: skip

names = st.sampled_from(NAMES)
file_names = st.sampled_from(FILE_NAMES)
slots = st.sampled_from(SLOTS)
offsets = st.one_of(st.integers(0, 9000), st.integers(BLOCK - 2000, BLOCK + 2000))
sizes = st.one_of(st.integers(0, 12000), st.just(BLOCK + 10))
datas = st.one_of(st.binary(min_size=1, max_size=3000), st.just(b"\x00" * 5000))

opens = st.builds(Open, slots, file_names, st.sampled_from(OPEN_FLAGS))
fd_io: st.SearchStrategy[Op] = st.one_of(
    st.builds(Write, slots, datas),
    st.builds(PWrite, slots, offsets, datas),
    st.builds(Read, slots, st.integers(0, 8000)),
    st.builds(PRead, slots, offsets, st.integers(0, 8000)),
    st.builds(Seek, slots, offsets),
)
ops: st.SearchStrategy[Op] = st.one_of(
    opens,
    fd_io,
    fd_io,  # listed twice: data operations are the most interesting, draw them more often
    st.builds(Close, slots),
    st.builds(FTruncate, slots, sizes),
    st.builds(FSync, slots),
    st.builds(FStat, slots),
    st.builds(Truncate, names, sizes),
    st.builds(Rename, names, names),
    st.builds(Unlink, names),
    st.builds(Link, names, names),
    st.builds(Chmod, names, st.sampled_from(MODES)),
    st.builds(ReadFile, names),
    st.builds(Stat, names),
    st.builds(Mkdir, names),
    st.builds(Rmdir, names),
)


# --- applying operations -------------------------------------------------------------


@dataclass
class World:
    """One side of the comparison: a root directory and its open-file slots."""

    root: Path
    fds: dict[int, int] = field(default_factory=dict)

    def path(self, name: str) -> Path:
        return self.root / name

    def close_all(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def attrs(s: os.stat_result) -> Result:
    kind = stat.S_IFMT(s.st_mode)
    # a directory's st_size is filesystem-specific; a file's is not
    size = s.st_size if stat.S_ISREG(kind) else None
    return (kind, stat.S_IMODE(s.st_mode), size, s.st_nlink)


def _apply(op: Op, w: World) -> Result:
    if isinstance(op, Open):
        if op.slot in w.fds:
            os.close(w.fds.pop(op.slot))
        w.fds[op.slot] = os.open(w.path(op.name), op.flags, 0o644)
        return ("opened",)
    if isinstance(op, ReadFile):
        with open(w.path(op.name), "rb") as f:
            return (f.read(),)
    if isinstance(op, Truncate):
        os.truncate(w.path(op.name), op.size)
        return ()
    if isinstance(op, Rename):
        os.rename(w.path(op.src), w.path(op.dst))
        return ()
    if isinstance(op, Unlink):
        os.unlink(w.path(op.name))
        return ()
    if isinstance(op, Link):
        os.link(w.path(op.src), w.path(op.dst))
        return ()
    if isinstance(op, Chmod):
        os.chmod(w.path(op.name), op.mode)
        return ()
    if isinstance(op, Stat):
        return attrs(os.stat(w.path(op.name)))
    if isinstance(op, Mkdir):
        os.mkdir(w.path(op.name), 0o755)
        return ()
    if isinstance(op, Rmdir):
        os.rmdir(w.path(op.name))
        return ()
    fd = w.fds.get(op.slot)
    if fd is None:
        return ("no fd",)
    if isinstance(op, Close):
        os.close(w.fds.pop(op.slot))
        return ()
    if isinstance(op, Write):
        return (os.write(fd, op.data), os.lseek(fd, 0, os.SEEK_CUR))
    if isinstance(op, PWrite):
        return (os.pwrite(fd, op.data, op.offset),)
    if isinstance(op, Read):
        return (os.read(fd, op.size), os.lseek(fd, 0, os.SEEK_CUR))
    if isinstance(op, PRead):
        return (os.pread(fd, op.size, op.offset),)
    if isinstance(op, Seek):
        return (os.lseek(fd, op.offset, os.SEEK_SET),)
    if isinstance(op, FTruncate):
        os.ftruncate(fd, op.size)
        return ()
    if isinstance(op, FSync):
        os.fsync(fd)
        return ()
    if isinstance(op, FStat):
        return attrs(os.fstat(fd))
    raise AssertionError(f"unknown op {op!r}")


def apply(op: Op, w: World) -> Result:
    try:
        return ("ok", *_apply(op, w))
    except OSError as exc:
        return ("error", errno.errorcode.get(exc.errno or 0, exc.errno))


def tree_state(root: Path) -> dict[str, object]:
    """Names, attributes, contents and hard-link groups of everything under root."""
    entries: dict[str, object] = {}
    by_inode: dict[int, list[str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted([*dirnames, *filenames]):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            s = os.lstat(path)
            content = None
            if stat.S_ISREG(s.st_mode):
                with open(path, "rb") as f:
                    content = f.read()
            entries[rel] = (attrs(s), content)
            by_inode.setdefault(s.st_ino, []).append(rel)
    groups = sorted(sorted(g) for g in by_inode.values())
    return {"entries": entries, "link_groups": groups}


# --- the test -----------------------------------------------------------------------

_examples = itertools.count()


def _fresh(base: Path) -> Path:
    root = base / f"example-{next(_examples)}"
    root.mkdir(parents=True)
    (root / "d").mkdir()
    (root / "a").write_bytes(b"initial a")
    (root / "d" / "c").write_bytes(b"initial c" * 100)
    return root


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    print_blob=True,
)
@given(
    first=st.tuples(
        st.builds(Open, st.just(0), file_names, st.sampled_from(OPEN_FLAGS)),
        st.builds(Open, st.just(1), file_names, st.sampled_from(OPEN_FLAGS)),
    ),
    sequence=st.lists(ops, min_size=1, max_size=50),
)
@example(  # a file written past its first block, then renamed: its unfetched base moved
    first=(Open(0, "d/c", os.O_WRONLY), Open(1, "a", os.O_RDWR)),
    sequence=[PWrite(0, BLOCK, b"w" * 5000), Rename("d/c", "a"), PRead(1, 0, 16), Unlink("a")],
)
@example(  # the same through a rename of the directory above it
    first=(Open(0, "d/c", os.O_RDWR), Open(1, "a", os.O_RDONLY)),
    sequence=[PWrite(0, BLOCK, b"w" * 5000), Rename("d", "e"), PRead(0, 0, 16), Unlink("e/c")],
)
def test_mount_matches_local_reference(
    mnt: Path, tmp_path: Path, first: tuple[Open, Open], sequence: list[Op]
) -> None:
    mount = World(_fresh(mnt / "prop"))
    ref = World(_fresh(tmp_path / "ref"))
    try:
        for step, op in enumerate([*first, *sequence]):
            expected = apply(op, ref)
            got = apply(op, mount)
            note(f"step {step}: {op!r:.150} -> ref {expected!r:.150}")
            assert got == expected, f"step {step}: {op!r:.150}: {got!r:.150} != {expected!r:.150}"
        # state while files are still open (unlinked-but-open files included)
        for slot in SLOTS:
            assert apply(FStat(slot), mount) == apply(FStat(slot), ref)
            assert apply(PRead(slot, 0, 1 << 23), mount) == apply(PRead(slot, 0, 1 << 23), ref)
        mount.close_all()
        ref.close_all()
        assert tree_state(mount.root) == tree_state(ref.root)
    finally:
        mount.close_all()
        ref.close_all()
        for root in (mount.root, ref.root):
            for dirpath, dirnames, _ in os.walk(root):
                for name in dirnames:
                    os.chmod(os.path.join(dirpath, name), 0o755)
            shutil.rmtree(root, ignore_errors=True)


def test_reference_world_sanity(tmp_path: Path) -> None:
    """The harness itself: a known sequence gives known results."""
    w = World(_fresh(tmp_path))
    try:
        assert apply(Open(0, "a", os.O_RDWR | os.O_APPEND), w) == ("ok", "opened")
        assert apply(Write(0, b"!"), w) == ("ok", 1, len(b"initial a!"))
        assert apply(Link("a", "d"), w) == ("error", "EEXIST")
        assert apply(Unlink("a"), w) == ("ok",)
        assert apply(FStat(0), w)[4] == 0
        assert apply(Rmdir("d"), w) == ("error", "ENOTEMPTY")
        assert apply(Read(1, 5), w) == ("ok", "no fd")
    finally:
        w.close_all()
