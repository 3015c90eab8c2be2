"""A mount whose process died (a sidecar killed for memory) leaves a dead mount that every
call fails with ENOTCONN (or ECONNABORTED); its restart with --take-over-dead-mount
detaches it and serves in its place, and without the flag the mountpoint is refused in
one line."""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

import pytest

from cloudfs.mount import runtime
from testkit.mounts import Backing, mounted


def test_a_restarted_mount_takes_over_its_dead_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_bytes(b"still here")
    with mounted(Backing(f"file://{data}", local_dir=data)) as m:
        assert (m.root / "a.txt").read_bytes() == b"still here"
        pid = runtime.read_pid(os.path.realpath(m.root))
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert runtime.wait_for_exit(pid, 10)
        with pytest.raises(OSError) as dead:
            os.stat(m.root / "a.txt")
        assert dead.value.errno in (errno.ENOTCONN, errno.ECONNABORTED)
        with pytest.raises(RuntimeError, match=r"mountpoint .* (is busy|does not exist)"):
            m.start()
        m.options.append("--take-over-dead-mount")
        started = time.monotonic()
        m.start()
        assert time.monotonic() - started < 30
        assert (m.root / "a.txt").read_bytes() == b"still here"
