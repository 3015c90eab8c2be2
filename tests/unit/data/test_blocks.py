"""Block keys and offset arithmetic."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cloudfs.data.blocks import (
    ObjectRef,
    block_count,
    block_key,
    block_length,
    block_span,
    blocks_for_range,
    consecutive_runs,
)


def test_block_key_depends_on_every_identity_field() -> None:
    ref = ObjectRef("train/0001.jpg", "etag-1", 1000)
    base = block_key("s3://b", ref, 3, 4096)
    assert len(base) == 64 and int(base, 16) >= 0
    assert base == block_key("s3://b", ObjectRef("train/0001.jpg", "etag-1", 1000), 3, 4096)
    variants = {
        block_key("s3://other", ref, 3, 4096),
        block_key("s3://b", ObjectRef("train/0001.jpg", "etag-2", 1000), 3, 4096),
        block_key("s3://b", ObjectRef("train/0002.jpg", "etag-1", 1000), 3, 4096),
        block_key("s3://b", ref, 4, 4096),
        block_key("s3://b", ref, 3, 8192),
        # field boundaries cannot be confused
        block_key("s3://btrain/0001.jpg", ObjectRef("", "etag-1", 1000), 3, 4096),
    }
    assert base not in variants and len(variants) == 6


def test_spans_and_counts() -> None:
    assert block_count(0, 10) == 0
    assert block_count(10, 10) == 1
    assert block_count(11, 10) == 2
    assert block_span(1, 15, 10) == (10, 15)
    assert block_length(1, 15, 10) == 5
    assert block_length(2, 15, 10) == 0
    assert list(blocks_for_range(5, 5, 10)) == []
    assert list(blocks_for_range(9, 11, 10)) == [0, 1]
    assert list(blocks_for_range(10, 20, 10)) == [1]


def test_consecutive_runs() -> None:
    assert consecutive_runs([], 4) == []
    assert consecutive_runs([0, 1, 2, 5, 6, 9], 4) == [[0, 1, 2], [5, 6], [9]]
    assert consecutive_runs([0, 1, 2, 3, 4], 2) == [[0, 1], [2, 3], [4]]


@given(st.integers(0, 10_000), st.integers(0, 5_000), st.integers(1, 700))
def test_blocks_for_range_covers_exactly(offset: int, length: int, bs: int) -> None:
    end = offset + length
    indexes = list(blocks_for_range(offset, end, bs))
    covered = {b for i in indexes for b in range(i * bs, (i + 1) * bs)}
    assert all(o in covered for o in range(offset, end))
    for i in indexes:  # no block is useless
        assert i * bs < end and (i + 1) * bs > offset
