"""CacheGroups (cloudfs/meta/service/groups.py) over the in-memory KV, with a fake clock."""

from __future__ import annotations

import pytest

from cloudfs.errors import InvalidArgument
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.meta.service.groups import CacheGroups
from cloudfs.meta.wire.groups import validate_member_address

SECOND = 10**9


class Clock:
    def __init__(self) -> None:
        self.now = 1_000 * SECOND

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def groups(clock: Clock) -> CacheGroups:
    return CacheGroups(MemoryKV(), clock=clock)


def test_joined_members_are_listed_sorted_per_group(groups: CacheGroups) -> None:
    groups.join("train", "10.0.0.2:7080", 5_000)
    groups.join("train", "10.0.0.1:7080", 5_000)
    groups.join("eval", "10.0.0.9:7080", 5_000)
    assert groups.members("train") == ["10.0.0.1:7080", "10.0.0.2:7080"]
    assert groups.members("eval") == ["10.0.0.9:7080"]
    assert groups.members("nobody") == []


def test_a_group_name_is_not_a_prefix_of_another(groups: CacheGroups) -> None:
    groups.join("a", "h:1", 5_000)
    groups.join("ab", "h:2", 5_000)
    assert groups.members("a") == ["h:1"]


def test_a_member_that_stops_renewing_is_not_listed_after_its_ttl(
    groups: CacheGroups, clock: Clock
) -> None:
    expiry = groups.join("g", "h:1", 3_000)
    assert expiry == clock.now + 3 * SECOND
    groups.join("g", "h:2", 3_000)
    clock.now += 2 * SECOND
    groups.join("g", "h:2", 3_000)  # a heartbeat renews h:2 only
    clock.now += 2 * SECOND
    assert groups.members("g") == ["h:2"]
    clock.now += 2 * SECOND
    assert groups.members("g") == []
    groups.join("g", "h:1", 3_000)  # back: listed again
    assert groups.members("g") == ["h:1"]


def test_expire_removes_only_expired_records(groups: CacheGroups, clock: Clock) -> None:
    groups.join("g", "h:1", 1_000)
    groups.join("g", "h:2", 10_000)
    groups.join("other", "h:3", 1_000)
    clock.now += 2 * SECOND
    assert groups.expire() == 2
    assert groups.expire() == 0
    assert groups.members("g") == ["h:2"]


def test_leave_is_immediate_and_idempotent(groups: CacheGroups) -> None:
    groups.join("g", "h:1", 5_000)
    groups.leave("g", "h:1")
    groups.leave("g", "h:1")
    assert groups.members("g") == []


def test_zero_ttl_is_the_default_and_out_of_range_is_refused(
    groups: CacheGroups, clock: Clock
) -> None:
    assert groups.join("g", "h:1") == clock.now + 10 * SECOND
    for ttl in (999, 300_001):
        with pytest.raises(InvalidArgument):
            groups.join("g", "h:1", ttl)


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "a\0b", "with space", "x" * 64, "grüppe"])
def test_bad_group_names_are_einval(groups: CacheGroups, name: str) -> None:
    with pytest.raises(InvalidArgument) as e:
        groups.join(name, "h:1", 5_000)
    assert e.value.errno == 22
    with pytest.raises(InvalidArgument):
        groups.members(name)


@pytest.mark.parametrize(
    "address",
    [
        "", "h", "h:", ":7080", "h:0", "h:65536", "h:x", "0.0.0.0:7080", "[::]:7080",
        "a,b:1", "h h:1", "[]:1", "h:1\0",
    ],
)  # fmt: skip
def test_bad_addresses_are_einval(groups: CacheGroups, address: str) -> None:
    with pytest.raises(InvalidArgument):
        groups.join("g", address, 5_000)


@pytest.mark.parametrize("address", ["10.0.0.1:7080", "[fd00::1]:7080", "worker-3.ns.svc:1"])
def test_good_addresses(address: str) -> None:
    validate_member_address(address)
