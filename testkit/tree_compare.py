"""What two mounts of one volume show of a directory, for checking that they agree."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

CONTENT_LIMIT = 1 << 20  # files up to this size are compared byte for byte...
CONTENT_FILES = 200  # ...the first this many of them (a 5,000-file test: names and stats)

Entry = tuple[object, ...]


def snapshot(root: Path) -> dict[str, Entry]:
    """Every path under ``root`` -> (type and mode, uid, gid, nlink, size, target or bytes)."""
    seen: dict[str, Entry] = {}
    read = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                extra: object = os.readlink(path)
            elif stat.S_ISREG(st.st_mode) and st.st_size <= CONTENT_LIMIT and read < CONTENT_FILES:
                extra = Path(path).read_bytes()
                read += 1
            else:
                extra = None
            size = st.st_size if not stat.S_ISDIR(st.st_mode) else None
            rel = os.path.relpath(path, root)
            seen[rel] = (st.st_mode, st.st_uid, st.st_gid, st.st_nlink, size, extra)
    return seen


def differences(a: dict[str, Entry], b: dict[str, Entry]) -> list[str]:
    out = [f"only in the first mount: {p}" for p in sorted(a.keys() - b.keys())]
    out += [f"only in the second mount: {p}" for p in sorted(b.keys() - a.keys())]
    fields = ("mode", "uid", "gid", "nlink", "size", "target or bytes")
    for p in sorted(a.keys() & b.keys()):
        for name, x, y in zip(fields, a[p], b[p], strict=True):
            if x != y:
                shown = (x, y) if name != "target or bytes" else ("...", "...")
                out.append(f"{p}: {name} {shown[0]!r} != {shown[1]!r}")
    return out


def assert_same_tree(first: Path, second: Path, timeout: float = 10.0) -> None:
    """``first`` and ``second`` (one directory seen by two mounts) agree within ``timeout``
    (changes reach the second mount asynchronously, and UFS listings age out)."""
    deadline = time.monotonic() + timeout
    while True:
        diff = differences(snapshot(first), snapshot(second))
        if not diff:
            return
        if time.monotonic() > deadline:
            raise AssertionError("the two mounts disagree:\n  " + "\n  ".join(diff[:20]))
        time.sleep(0.2)
