"""A 5,000-object S3 prefix lists through the mount with LIST requests, not a HEAD per file.

A counting proxy sits between the mount (--s3-endpoint) and the S3 server, so
the test sees the mount's requests by method and target.
"""

from __future__ import annotations

import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from testkit.faults_proxy import running_proxy
from testkit.mounts import Backing, mounted
from tests.fuse.conftest import MountFactory

N = 5000


@pytest.mark.slow
@pytest.mark.parametrize("backing", ["s3"], indirect=True)
def test_5000_objects_list_without_per_file_heads(
    backing: Backing, mount_factory: MountFactory
) -> None:
    assert backing.s3 is not None
    client = backing.s3.client()
    sizes = {f"f{i:05d}.dat": i % 97 for i in range(N)}

    def put(name: str) -> None:
        client.put_object(Bucket=backing.bucket, Key=f"big/{name}", Body=b"z" * sizes[name])

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(put, sizes))
    print(f"\nuploaded {N} objects in {time.monotonic() - t0:.1f}s")

    with (
        running_proxy(backing.s3.endpoint) as proxy,
        mounted(backing, ["--s3-endpoint", proxy.endpoint, "--meta-ttl", "600"]) as m,
    ):
        proxy.reset_counts()
        t0 = time.monotonic()
        seen = {}
        with os.scandir(m.root / "big") as it:
            for entry in it:
                st = entry.stat(follow_symlinks=False)
                assert stat.S_ISREG(st.st_mode)
                seen[entry.name] = st.st_size
        took = time.monotonic() - t0
        counts = proxy.counts()
        lists = [t for meth, t in proxy.requests if meth == "GET" and "list-type=2" in t]
        print(f"listed+stat {N} entries in {took:.1f}s; requests {dict(counts)}")
        assert seen == sizes
        assert counts["HEAD"] < 10, counts
        assert len(lists) >= N // 1000, lists
        assert counts["GET"] - len(lists) == 0, counts  # no object bodies fetched
        assert len(lists) < 20, len(lists)
        # a second pass is served from the tree: no requests at all
        proxy.reset_counts()
        assert len(os.listdir(m.root / "big")) == N
        assert proxy.count() == 0, proxy.counts()
