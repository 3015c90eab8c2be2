"""cache_first: cached samples first within each window, nothing else changes."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudfs.hints.cache_first import cache_first


@st.composite
def epochs(draw: st.DrawFn) -> tuple[list[int], list[bool], int]:
    """An order (repeats allowed, as a padded DistributedSampler yields), its flags, a window."""
    order = draw(st.lists(st.integers(0, 50), max_size=200))
    cached = draw(st.lists(st.booleans(), min_size=len(order), max_size=len(order)))
    window = draw(st.integers(1, 40))
    return order, cached, window


@given(epochs())
def test_the_result_is_a_permutation_of_the_order(epoch: tuple[list[int], list[bool], int]) -> None:
    order, cached, window = epoch
    assert Counter(cache_first(order, cached, window)) == Counter(order)


@given(epochs())
def test_it_moves_places_not_values(epoch: tuple[list[int], list[bool], int]) -> None:
    """The reordering depends only on the flags, so repeated indices are handled by place."""
    order, cached, window = epoch
    places = cache_first(list(range(len(order))), cached, window)
    assert sorted(places) == list(range(len(order)))
    assert cache_first(order, cached, window) == [order[p] for p in places]


@given(epochs())
def test_no_item_moves_by_a_window_or_more(epoch: tuple[list[int], list[bool], int]) -> None:
    order, cached, window = epoch
    places = cache_first(list(range(len(order))), cached, window)
    for new, old in enumerate(places):
        assert abs(new - old) < window
        assert new // window == old // window  # it stays in its own window


@given(epochs(), st.booleans())
def test_all_or_none_cached_is_the_identity(
    epoch: tuple[list[int], list[bool], int], held: bool
) -> None:
    order, _, window = epoch
    assert cache_first(order, [held] * len(order), window) == order


@given(epochs())
def test_each_window_yields_its_cached_first_in_their_order(
    epoch: tuple[list[int], list[bool], int],
) -> None:
    order, cached, window = epoch
    places = cache_first(list(range(len(order))), cached, window)
    for start in range(0, len(order), window):
        got = places[start : start + window]
        mine = range(start, min(start + window, len(order)))
        held = [p for p in mine if cached[p]]
        cold = [p for p in mine if not cached[p]]
        assert got == held + cold


def test_a_window_of_one_is_the_identity() -> None:
    assert cache_first([3, 1, 2], [False, True, True], 1) == [3, 1, 2]


def test_an_example() -> None:
    order = [10, 11, 12, 13, 14, 15, 16]
    cached = [False, True, False, True, True, False, True]
    assert cache_first(order, cached, 3) == [11, 10, 12, 13, 14, 15, 16]
    assert cache_first(order, cached, 4) == [11, 13, 10, 12, 14, 16, 15]


@pytest.mark.parametrize("window", [0, -1])
def test_a_window_below_one_is_refused(window: int) -> None:
    with pytest.raises(ValueError, match="window"):
        cache_first([1, 2], [True, False], window)


def test_flags_must_match_the_order() -> None:
    with pytest.raises(ValueError, match="cached flags"):
        cache_first([1, 2, 3], [True, False], 2)
