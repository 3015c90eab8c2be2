"""Read-only opens of a read-write mount ask for no FLUSH (``FileInfo.noflush``).

Their close has nothing to upload, and each FLUSH was a trip through the trio loop
(issue 26: requests Python never needs to see). The patched pyfuse3 of
``deploy/pyfuse3/`` (noflush.patch) carries the flag; CI installs it, so these tests
fail, not skip, without it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testkit.mounts import Backing, mounted
from tests.fuse.test_dataset_mode import _ops

pytestmark = pytest.mark.fuse


def test_read_only_opens_cost_no_flush_and_writes_still_reach_the_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.bin").write_bytes(b"a" * 5000)
    with mounted(Backing(f"file://{data}", local_dir=data)) as m:
        path = m.root / "a.bin"
        for _ in range(5):
            assert path.read_bytes() == b"a" * 5000
        before = _ops(m)
        for _ in range(5):
            assert path.read_bytes() == b"a" * 5000
        after = _ops(m)
        assert after.get("flush", 0) == before.get("flush", 0), (before, after)
        assert after["release"] - before.get("release", 0) >= 5  # the opens went through us

        # A writer's close still flushes, also with a read-only handle opened and closed
        # meanwhile (that close used to upload the writer's bytes; the writer's does now).
        writer = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(writer, b"new bytes")
            reader = os.open(path, os.O_RDONLY)
            os.close(reader)
        finally:
            os.close(writer)
        assert _ops(m)["flush"] > after.get("flush", 0)
        assert (data / "a.bin").read_bytes() == b"new bytes"
        assert path.read_bytes() == b"new bytes"
