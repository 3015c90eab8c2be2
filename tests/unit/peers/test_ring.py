"""Rendezvous placement: every node agrees, and membership changes move few blocks."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudfs.peers.ring import Ring

KEYS = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(4000)]

member = st.from_regex(r"10\.0\.[0-9]{1,3}\.[0-9]{1,3}:[1-9][0-9]{3}", fullmatch=True)
groups = st.lists(member, min_size=3, max_size=3, unique=True)


def owners(ring: Ring) -> list[str]:
    return [ring.owner(k) for k in KEYS]


@settings(max_examples=25, deadline=None)
@given(groups, member)
def test_a_fourth_member_takes_about_a_quarter_and_only_for_itself(
    three: list[str], fourth: str
) -> None:
    if fourth in three:
        return
    before = owners(Ring(three))
    after = owners(Ring([*three, fourth]))
    moved = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert all(a == fourth for _, a in moved)  # nothing moves between the old members
    assert 0.20 <= len(moved) / len(KEYS) <= 0.30


@settings(max_examples=25, deadline=None)
@given(st.lists(member, min_size=4, max_size=4, unique=True), st.integers(0, 3))
def test_removing_a_member_moves_only_its_own_blocks(four: list[str], gone: int) -> None:
    before = owners(Ring(four))
    after = owners(Ring([m for i, m in enumerate(four) if i != gone]))
    for b, a in zip(before, after, strict=True):
        if b != four[gone]:
            assert a == b
        else:
            assert a != four[gone]
    share = before.count(four[gone]) / len(KEYS)
    assert 0.20 <= share <= 0.30


@given(groups)
def test_every_node_agrees_whatever_order_it_lists_the_members_in(three: list[str]) -> None:
    a, b = Ring(three), Ring([*reversed(three), three[0]])
    assert a.members == b.members
    assert [a.owner(k) for k in KEYS[:200]] == [b.owner(k) for k in KEYS[:200]]


def test_ranked_starts_with_the_owner_and_lists_each_member_once() -> None:
    ring = Ring(["a:1", "b:2", "c:3"])
    for key in KEYS[:100]:
        ranked = ring.ranked(key)
        assert ranked[0] == ring.owner(key)
        assert sorted(ranked) == ["a:1", "b:2", "c:3"]
        # the runner-up is who owns the block once the owner is gone
        assert Ring([m for m in ring.members if m != ranked[0]]).owner(key) == ranked[1]


def test_placement_is_fixed_across_releases() -> None:
    """Mounts and workers of different versions must agree: pin a few placements."""
    ring = Ring(["10.0.0.1:7080", "10.0.0.2:7080", "10.0.0.3:7080"])
    assert "".join(ring.owner(k)[-6] for k in KEYS[:12]) == "131121223121"


def test_a_group_needs_a_member() -> None:
    with pytest.raises(ValueError):
        Ring([" ", ""])
