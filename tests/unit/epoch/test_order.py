"""EpochOrder: where a job is in its announced order, followed from its reads.

The position is the first file not read yet; loader workers read out of order,
so a read anywhere counts, and a file never read is passed over once reads are
``SKIP_TOLERANCE`` places beyond it.
"""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudfs.epoch.order import SKIP_TOLERANCE, EpochOrder


def make_order(inodes: list[int], size: int = 10) -> EpochOrder:
    return EpochOrder(array("Q", inodes), array("Q", [size] * len(inodes)))


def first_unread(order: EpochOrder) -> int:
    return next((i for i in range(len(order)) if not order.was_read(i)), len(order))


def test_an_order_holds_its_files_and_sizes() -> None:
    order = EpochOrder(array("Q", [30, 10, 20]), array("Q", [3, 1, 2]))
    assert len(order) == 3 and order.total_bytes == 6
    assert [order.inode(i) for i in range(3)] == [30, 10, 20]
    assert [order.size(i) for i in range(3)] == [3, 1, 2]
    assert order.contains(20) and not order.contains(25)
    assert order.position == 0 and order.furthest == -1 and not order.done


def test_one_size_per_inode() -> None:
    with pytest.raises(ValueError):
        EpochOrder(array("Q", [1, 2]), array("Q", [1]))


def test_an_empty_order_is_done() -> None:
    order = make_order([])
    assert order.done and order.mark_read(1) is None


def test_the_position_follows_reads_in_order() -> None:
    inodes = [500 - i for i in range(50)]  # not sorted: places are not inode order
    order = make_order(inodes)
    for place, inode in enumerate(inodes):
        assert order.position == place
        assert order.mark_read(inode) == place
        assert order.position == place + 1 and order.furthest == place
    assert order.done


def test_workers_reading_out_of_order_leave_the_position_at_the_first_unread() -> None:
    """4 loader workers, 2 batches of 8 each in flight: 64 files read in any order
    around the position; it always stays at the first file not read yet."""
    workers, prefetch, batch = 4, 2, 8
    inodes = list(range(1000, 1256))
    order = make_order(inodes)
    batches = [inodes[i : i + batch] for i in range(0, len(inodes), batch)]
    # Worker w reads batches w, w + 4, ...; each keeps ``prefetch`` batches going and
    # the workers take turns a file at a time, the later batches first.
    in_flight = workers * prefetch
    for start in range(0, len(batches), in_flight):
        window = batches[start : start + in_flight]
        reads = [f for files in zip(*reversed(window), strict=True) for f in files]
        for inode in reads:
            place = order.mark_read(inode)
            assert place == inodes.index(inode)
            assert order.position == first_unread(order)
        assert order.position == min(len(inodes), (start + in_flight) * batch)
    assert order.done


def test_a_file_never_read_is_passed_once_reads_are_far_enough_beyond_it() -> None:
    skipped = 5
    inodes = list(range(1, SKIP_TOLERANCE + skipped + 10))
    order = make_order(inodes)
    for place in range(len(inodes)):
        if place == skipped:
            continue  # a worker failed on it
        order.mark_read(inodes[place])
        if place < skipped:
            assert order.position == place + 1
        elif place <= skipped + SKIP_TOLERANCE:
            assert order.position == skipped, place  # still waiting for it
        else:
            assert order.position == place + 1, place  # passed over
    assert order.done and not order.was_read(skipped)
    # Read late after all, it takes its place without moving anything back.
    assert order.mark_read(inodes[skipped]) == skipped
    assert order.done


def test_each_occurrence_of_a_file_named_twice_is_read_once() -> None:
    order = make_order([7, 3, 7, 9])
    assert order.mark_read(7) == 0
    assert order.position == 1
    assert order.mark_read(7) == 2
    assert order.position == 1  # 3 is not read yet
    assert order.mark_read(7) is None  # both places read already
    assert order.mark_read(3) == 1
    assert order.position == 3
    assert order.mark_read(9) == 3
    assert order.done


def test_a_read_of_a_file_outside_the_order_changes_nothing() -> None:
    order = make_order([4, 2, 6])
    order.mark_read(4)
    assert order.mark_read(5) is None
    assert order.mark_read(1) is None and order.mark_read(99) is None
    assert order.position == 1 and order.furthest == 0


@settings(max_examples=200, deadline=None)
@given(st.data(), st.integers(min_value=0, max_value=300))
def test_any_permutation_read_in_any_order_ends_at_the_end(data: st.DataObject, n: int) -> None:
    inodes = data.draw(st.permutations([i * 7 + 2 for i in range(n)]), label="order")
    reads = data.draw(st.permutations(inodes), label="reads")
    order = make_order(inodes)
    place_of = {inode: place for place, inode in enumerate(inodes)}
    for inode in reads:
        assert order.mark_read(inode) == place_of[inode]
        # Everything before the position was read (n < SKIP_TOLERANCE: nothing passed
        # over), and the position itself is not.
        assert order.position == first_unread(order)
    assert order.position == len(inodes) and order.done


@settings(max_examples=100, deadline=None)
@given(st.data(), st.lists(st.integers(min_value=1, max_value=20), max_size=60))
def test_orders_with_repeats_end_at_the_end(data: st.DataObject, inodes: list[int]) -> None:
    reads = data.draw(st.permutations(inodes), label="reads")
    order = make_order(inodes)
    places = set()
    for inode in reads:
        place = order.mark_read(inode)
        assert place is not None and inodes[place] == inode and place not in places
        places.add(place)
    assert order.position == len(inodes) and order.done
    assert all(order.mark_read(inode) is None for inode in set(inodes))
