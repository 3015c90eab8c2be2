"""CacheReports: per-volume bytes per node, summed over a node's mounts, expiring by TTL."""

from __future__ import annotations

import pytest

from cloudfs.errors import InvalidArgument
from cloudfs.meta.service.cache_reports import CacheReports


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        return self.now


def test_sums_a_nodes_mounts_and_replaces_a_reporters_last_report() -> None:
    reports = CacheReports(clock=Clock())
    reports.report("data", "node-a", "m1", 100)
    reports.report("data", "node-a", "m2", 50)
    reports.report("data", "node-a", "m1", 200)  # replaces m1's 100
    reports.report("data", "node-b", "m3", 7)
    reports.report("other", "node-c", "m4", 9)
    assert reports.cached_bytes("data") == {"node-a": 250, "node-b": 7}
    assert reports.cached_bytes("nothing") == {}


def test_a_report_lapses_after_its_ttl() -> None:
    clock = Clock()
    reports = CacheReports(clock=clock)
    reports.report("data", "node-a", "m1", 100, ttl_ms=2_000)
    clock.now += 1_000_000_000
    assert reports.cached_bytes("data") == {"node-a": 100}
    clock.now += 2_000_000_000
    assert reports.cached_bytes("data") == {}
    assert reports.expire() == 1


@pytest.mark.parametrize(
    ("volume", "node", "reporter", "ttl_ms"),
    [("", "n", "r", 0), ("v", "", "r", 0), ("v", "n", "", 0), ("v", "n", "r", 10)],
)
def test_refuses_bad_reports(volume: str, node: str, reporter: str, ttl_ms: int) -> None:
    with pytest.raises(InvalidArgument):
        CacheReports().report(volume, node, reporter, 1, ttl_ms)
