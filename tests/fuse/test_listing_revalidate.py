"""Past --meta-ttl a listed directory is served from its old listing while a slow LIST
refreshes it in the background (stale-while-revalidate); the change shows up after."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from testkit.faults_proxy import running_proxy
from testkit.mounts import Backing
from tests.fuse.conftest import MountFactory

T = TypeVar("T")
TTL = 1.0
LIST_DELAY = 4.0  # every S3 request through the proxy waits this long
FAST = 1.0  # a stale listing is served far quicker than the delayed LIST


def timed(call: Callable[[], T]) -> tuple[T, float]:
    start = time.monotonic()
    result = call()
    return result, time.monotonic() - start


@pytest.mark.slow
@pytest.mark.parametrize("backing", ["s3"], indirect=True)
def test_a_slow_list_does_not_hold_up_a_listed_directory(
    backing: Backing, mount_factory: MountFactory
) -> None:
    assert backing.s3 is not None
    backing.write_object("data/a.txt", b"a")
    with (
        running_proxy(backing.s3.endpoint) as proxy,
        mount_factory("--s3-endpoint", proxy.endpoint, "--meta-ttl", str(TTL)) as m,
    ):
        data = m.root / "data"
        assert os.listdir(data) == ["a.txt"]
        backing.write_object("data/b.txt", b"bb")  # behind the mount's back
        proxy.delay = LIST_DELAY
        try:
            time.sleep(TTL * 1.5)  # the listing is stale now; its LIST is slow
            names, took = timed(lambda: sorted(os.listdir(data)))
            assert took < FAST, f"listdir waited {took:.1f} s for the LIST"
            assert names in (["a.txt"], ["a.txt", "b.txt"])
            size, took = timed(lambda: os.stat(data / "a.txt").st_size)
            assert took < FAST and size == 1, f"stat waited {took:.1f} s"

            deadline = time.monotonic() + LIST_DELAY * 4
            while "b.txt" not in os.listdir(data):
                assert time.monotonic() < deadline, "the background listing never landed"
                time.sleep(0.1)
        finally:
            proxy.delay = 0.0
        assert (data / "b.txt").read_bytes() == b"bb"
