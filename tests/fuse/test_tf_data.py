"""tf.data with a seeded shuffle, announced through cloudfs.hints, over a real mount.

The docs' recipe (docs/training.md): draw the epoch's order, announce it, and
build the dataset from the same order. The mount then sees reads in exactly
the announced order (its position moves with them) and its window fetched
the files before TensorFlow asked.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

tf = pytest.importorskip("tensorflow", reason="needs TensorFlow (.ci/setup installs the CPU wheel)")

from cloudfs import hints  # noqa: E402
from testkit.hints import stats_jobs  # noqa: E402
from testkit.mounts import Backing, Mount, mounted  # noqa: E402
from testkit.servers import S3Server  # noqa: E402

pytestmark = [pytest.mark.fuse, pytest.mark.slow]  # importing TensorFlow takes seconds

FILES = 64
SIZE = 4096


@pytest.fixture
def tf_mount(s3_server: S3Server) -> Iterator[tuple[Mount, list[str], dict[str, bytes]]]:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("mount tests need /dev/fuse and root")
    bucket = f"tfdata-{os.getpid()}"
    s3_server.client().create_bucket(Bucket=bucket)
    backing = Backing(uri=f"s3://{bucket}", s3=s3_server, bucket=bucket)
    data = {f"train/{i:04d}.bin": os.urandom(SIZE) for i in range(FILES)}
    for key, value in data.items():
        backing.write_object(key, value)
    with mounted(backing, ["--read-only", "--block-size", "64K"]) as mount:
        files = sorted(str(mount.root / key) for key in data)
        yield mount, files, {str(mount.root / k): v for k, v in data.items()}


def test_a_tf_data_epoch_reads_the_announced_order(tf_mount: Any) -> None:
    mount, files, data = tf_mount
    order = random.Random(11).sample(files, len(files))
    with hints.announce(order, job="tf-test", epoch=0) as announcement:
        assert announcement.accepted == FILES
        dataset = tf.data.Dataset.from_tensor_slices(order).map(
            lambda path: (path, tf.io.read_file(path)), deterministic=True
        )
        read = [(p.numpy().decode(), c.numpy()) for p, c in dataset]
        assert [p for p, _ in read] == order
        assert all(content == data[p] for p, content in read)
        (job,) = stats_jobs(mount)
        assert job["job"] == "tf-test"
        assert job["position"] == FILES and job["read_files"] == FILES  # in the announced order
        assert job["prefetched_bytes"] > 0
    assert stats_jobs(mount) == []
    assert Path(files[0]).read_bytes() == data[files[0]]  # the mount is fine after the job
