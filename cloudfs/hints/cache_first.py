"""Reorder an epoch so that, within bounded windows, cached samples come first.

A shuffled epoch reads cold files while warm ones wait for their turn. With
the order split into consecutive windows of ``window`` samples, reading each
window's cached samples first gives the mount time to fetch the uncached ones
(which it does along the announced order) without changing what the epoch
reads. ``CloudFSSampler(cache_first=True)`` applies it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["cache_first"]


def cache_first(order: Sequence[int], cached: Sequence[bool], window: int) -> list[int]:
    """Within each window of ``window`` consecutive places, the cached samples first.

    ``order`` is split into consecutive windows of ``window`` items (the last
    may be shorter). Each window yields its cached items first, in their
    relative order, then its uncached ones, in theirs. ``cached[k]`` says
    whether ``order[k]`` is cached (aligned by position, so repeated indices,
    as a padded ``DistributedSampler`` yields, are fine).

    What it does to randomness: the epoch's sample set (with multiplicity) is
    unchanged, and the order across windows is exactly the input's. Inside a
    window the order becomes "cached first", so samples that were cached,
    typically those read late in the previous epoch and kept, cluster at the
    start of each window and batches near each other may be correlated with
    what was cached. No item moves by ``window`` places or more, so the window
    bounds the effect: pick it a few batches wide. With every sample cached,
    or none, the order is unchanged.

    Args:
        order: the epoch's sample indices, in reading order.
        cached: for each place of ``order``, whether that sample is cached.
        window: the number of consecutive places reordered together (>= 1).

    Returns:
        A permutation of ``order``.

    Raises:
        ValueError: ``window`` < 1, or ``cached`` is not as long as ``order``.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1, not {window}")
    if len(cached) != len(order):
        raise ValueError(f"{len(cached)} cached flags for an order of {len(order)}")
    out: list[int] = []
    for start in range(0, len(order), window):
        places = range(start, min(start + window, len(order)))
        out.extend(order[k] for k in places if cached[k])
        out.extend(order[k] for k in places if not cached[k])
    return out
