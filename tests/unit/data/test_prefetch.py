"""ReadCursor: sequential detection and the growing read-ahead window (pure policy)."""

from __future__ import annotations

from cloudfs.data.blocks import ObjectRef
from cloudfs.data.prefetch import ReadCursor

BS = 100
REF = ObjectRef("k", "e", 100 * BS)


def read_blocks(cursor: ReadCursor, blocks: range, step: int = BS // 4) -> list[range]:
    issued = []
    for offset in range(blocks.start * BS, blocks.stop * BS, step):
        plan = cursor.plan(REF, offset, offset + step, BS, 8)
        if plan:
            cursor.issued(plan.stop)
            issued.append(plan)
    return issued


def test_window_doubles_to_the_limit_in_few_large_batches() -> None:
    cursor = ReadCursor()
    issued = read_blocks(cursor, range(0, 40))
    assert issued[0] == range(1, 2)
    assert issued[1] == range(2, 4)
    assert cursor.window == 8
    sizes = [len(r) for r in issued]
    assert max(sizes) <= 8
    assert sizes[-1] >= 4, "at full window each batch covers at least half of it"
    blocks = [b for r in issued for b in r]
    assert blocks == sorted(set(blocks)), "no block is requested twice"
    assert len(issued) <= 14


def test_seek_resets_the_window() -> None:
    cursor = ReadCursor()
    read_blocks(cursor, range(0, 10))
    assert cursor.window == 8
    assert not cursor.plan(REF, 70 * BS, 70 * BS + 10, BS, 8)
    assert cursor.window == 0 and cursor.seeks == 1
    plan = cursor.plan(REF, 70 * BS + 10, 70 * BS + 20, BS, 8)
    assert plan == range(71, 72) and cursor.window == 2


def test_first_read_not_at_zero_is_not_sequential() -> None:
    cursor = ReadCursor()
    assert not cursor.plan(REF, 5 * BS, 5 * BS + 10, BS, 8)
    assert cursor.plan(REF, 5 * BS + 10, 5 * BS + 20, BS, 8) == range(6, 7)


def test_window_stops_at_object_end_and_zero_disables() -> None:
    cursor = ReadCursor()
    small = ObjectRef("k", "e", 2 * BS)
    assert cursor.plan(small, 0, BS, BS, 8) == range(1, 2)
    cursor.issued(2)
    assert not cursor.plan(small, BS, 2 * BS, BS, 8)
    assert not ReadCursor().plan(REF, 0, 10, BS, 0)


def test_new_object_version_resets() -> None:
    cursor = ReadCursor()
    read_blocks(cursor, range(0, 5))
    changed = ObjectRef("k", "e2", REF.size)
    assert cursor.plan(changed, 0, 10, BS, 8) == range(1, 2)
