"""Many threads reading one large S3-backed file at random offsets all get the right bytes."""

from __future__ import annotations

import os
import random
import threading

import pytest

from testkit.mounts import Backing
from tests.fuse.conftest import MountFactory

MiB = 1024 * 1024


@pytest.mark.parametrize("backing", ["s3"], indirect=True)
@pytest.mark.parametrize(
    "options",
    [(), ("--block-size", "256K", "--readahead-blocks", "4")],
    ids=["default-blocks", "small-blocks"],
)
def test_eight_threads_random_reads(
    backing: Backing, mount_factory: MountFactory, options: tuple[str, ...]
) -> None:
    data = os.urandom(20 * MiB + 12345)
    backing.write_object("large.bin", data)
    errors: list[str] = []
    with mount_factory(*options) as m:
        path = m.root / "large.bin"
        shared_fd = os.open(path, os.O_RDONLY)
        start = threading.Barrier(8)

        def worker(n: int) -> None:
            rng = random.Random(n)
            own_fd = os.open(path, os.O_RDONLY)
            try:
                start.wait()
                for i in range(60):
                    fd = shared_fd if i % 2 else own_fd
                    off = rng.randrange(0, len(data) + 100)
                    size = rng.choice([1, 4096, 100_000, 1 * MiB, rng.randrange(1, 3 * MiB)])
                    got = os.pread(fd, size, off)
                    if got != data[off : off + size]:
                        errors.append(f"thread {n}: wrong bytes at {off}+{size}")
                        return
            except Exception as e:
                errors.append(f"thread {n}: {e!r}")
            finally:
                os.close(own_fd)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert not any(t.is_alive() for t in threads), "a reader hung"
        finally:
            os.close(shared_fd)
        assert not errors, errors
        assert path.read_bytes() == data
