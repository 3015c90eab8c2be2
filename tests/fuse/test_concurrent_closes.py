"""Closes of one file's handles at the same moment (write-through): one upload, and the
version the tree records is the one the store holds.

Each close is a FLUSH, and each FLUSH of a file with unsent bytes used to upload it: two
at once uploaded the same bytes twice, and on a ``file://`` UFS (whose versions name the
file's mtime and inode) the tree could record the first upload's version while the store
held the second's.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from testkit.hints import metrics
from testkit.mounts import Backing, Mount, mounted

pytestmark = pytest.mark.fuse

HANDLES = 4


def _puts(mount: Mount) -> float:
    return metrics(mount).value("cloudfs_ufs_requests_total", op="put")


def test_concurrent_closes_of_one_file_upload_it_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with mounted(Backing(f"file://{data}", local_dir=data)) as m:
        path = m.root / "f.bin"
        path.write_bytes(b"old")
        before = _puts(m)
        fds = [os.open(path, os.O_WRONLY) for _ in range(HANDLES)]
        os.write(fds[0], b"new bytes, from one of the handles")
        start = threading.Barrier(HANDLES)
        errors: list[OSError] = []

        def close(fd: int) -> None:
            start.wait()
            try:
                os.close(fd)
            except OSError as e:
                errors.append(e)

        threads = [threading.Thread(target=close, args=(fd,)) for fd in fds]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
            assert not t.is_alive(), "a close did not return"
        assert errors == []
        assert _puts(m) - before == 1
        assert (data / "f.bin").read_bytes() == b"new bytes, from one of the handles"
        assert path.read_bytes() == b"new bytes, from one of the handles"
