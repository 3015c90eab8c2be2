"""MemberHealth: a failing member is left out for a growing back-off, then probed once."""

from __future__ import annotations

from cloudfs.peers.health import MemberHealth


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_failed_member_is_left_out_then_probed_by_one_caller() -> None:
    clock = Clock()
    health = MemberHealth(first=2.0, longest=30.0, probe_window=6.0, clock=clock)
    assert health.usable("a:1")
    assert health.failed("a:1") == 2.0
    assert not health.usable("a:1")
    assert health.usable("b:2")  # others are not affected
    clock.now += 2.0
    assert health.usable("a:1")  # the probe...
    assert not health.usable("a:1")  # ...and nobody else while it runs
    health.succeeded("a:1")
    assert health.usable("a:1") and health.usable("a:1")
    assert health.failing() == []


def test_back_off_doubles_up_to_the_longest_and_a_lost_probe_expires() -> None:
    clock = Clock()
    health = MemberHealth(first=2.0, longest=30.0, probe_window=6.0, clock=clock)
    assert [health.failed("a:1") for _ in range(6)] == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    clock.now += 30.0
    assert health.usable("a:1")  # a probe whose caller never reports back...
    clock.now += 6.0
    assert health.usable("a:1")  # ...does not keep the member out for ever
    assert health.failing() == ["a:1"]
