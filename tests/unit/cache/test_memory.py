"""MemoryBlockCache: LRU order, capacity, metrics, thread safety."""

from __future__ import annotations

import threading

from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.metrics import Metrics


def sample(metrics: Metrics, name: str, tier: str = "memory") -> float:
    value = metrics.registry.get_sample_value(name, {"tier": tier})
    return 0.0 if value is None else value


def test_get_put_and_counters() -> None:
    metrics = Metrics()
    cache = MemoryBlockCache(100, metrics)
    assert cache.get("k1", size_hint=10) is None
    cache.put("k1", b"x" * 10)
    assert cache.get("k1") == b"x" * 10
    assert cache.contains("k1") and not cache.contains("k2")
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.hit_bytes, stats.miss_bytes) == (1, 1, 10, 10)
    assert (stats.blocks, stats.bytes) == (1, 10)
    assert sample(metrics, "cloudfs_blockcache_hits_total") == 1
    assert sample(metrics, "cloudfs_blockcache_misses_total") == 1
    assert sample(metrics, "cloudfs_blockcache_hit_bytes_total") == 10
    assert sample(metrics, "cloudfs_blockcache_miss_bytes_total") == 10
    assert sample(metrics, "cloudfs_blockcache_bytes") == 10
    assert sample(metrics, "cloudfs_blockcache_blocks") == 1


def test_returns_the_stored_object_without_copying() -> None:
    cache = MemoryBlockCache(100, Metrics())
    data = b"abc" * 5
    cache.put("k", data)
    assert cache.get("k") is data


def test_lru_eviction_order_and_eviction_metric() -> None:
    metrics = Metrics()
    cache = MemoryBlockCache(30, metrics)
    for key in ("a", "b", "c"):
        cache.put(key, key.encode() * 10)
    assert cache.get("a") is not None  # a becomes most recently used
    cache.put("d", b"d" * 10)
    assert not cache.contains("b")
    assert all(cache.contains(k) for k in ("a", "c", "d"))
    assert cache.stats().evictions == 1
    assert sample(metrics, "cloudfs_blockcache_evictions_total") == 1


def test_capacity_holds_with_three_times_the_data() -> None:
    metrics = Metrics()
    cache = MemoryBlockCache(10 * 64, metrics)
    for i in range(30):
        cache.put(f"k{i}", bytes([i]) * 64)
        assert cache.stats().bytes <= 10 * 64
    stats = cache.stats()
    assert stats.blocks == 10 and stats.evictions == 20
    assert [cache.contains(f"k{i}") for i in range(30)] == [False] * 20 + [True] * 10
    assert sample(metrics, "cloudfs_blockcache_bytes") == 640


def test_replace_discard_and_oversize() -> None:
    cache = MemoryBlockCache(100, Metrics())
    cache.put("k", b"1" * 40)
    cache.put("k", b"2" * 50)
    assert cache.get("k") == b"2" * 50 and cache.stats().bytes == 50
    cache.put("huge", b"h" * 101)  # declined, does not flush the rest
    assert not cache.contains("huge") and cache.contains("k")
    cache.discard("k")
    cache.discard("k")
    assert cache.stats().bytes == 0 and cache.stats().evictions == 0


def test_separate_tiers_have_separate_labels() -> None:
    metrics = Metrics()
    a = MemoryBlockCache(100, metrics, tier="memory")
    b = MemoryBlockCache(100, metrics, tier="peer")
    a.put("k", b"1")
    b.get("k")
    assert sample(metrics, "cloudfs_blockcache_misses_total", "peer") == 1
    assert sample(metrics, "cloudfs_blockcache_misses_total", "memory") == 0
    assert b.tier == "peer"


def test_thread_safety_keeps_accounting_consistent() -> None:
    cache = MemoryBlockCache(50 * 100, Metrics())

    def worker(seed: int) -> None:
        for i in range(2000):
            key = f"k{(seed * 7 + i) % 200}"
            if cache.get(key) is None:
                cache.put(key, bytes([seed]) * (50 + i % 100))
            if i % 13 == 0:
                cache.discard(key)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = cache.stats()
    assert stats.bytes <= 50 * 100
    held = [k for k in (f"k{i}" for i in range(200)) if cache.contains(k)]
    assert len(held) == stats.blocks
    assert sum(len(cache.get(k) or b"") for k in held) == stats.bytes


def test_read_range_slices_the_block_and_counts_like_get() -> None:
    cache = MemoryBlockCache(1000, Metrics())
    cache.put("k", b"0123456789")
    assert cache.read_range("k", 2, 3) == b"234"
    assert cache.read_range("k", 8, 10) == b"89"
    whole = cache.read_range("k", 0, 10)
    assert whole == b"0123456789" and whole is cache.get("k")  # no copy of a whole block
    assert cache.read_range("missing", 0, 1, size_hint=1) is None
    stats = cache.stats()
    assert (stats.hits, stats.misses) == (4, 1)


def test_miss_if_absent_counts_only_absent_blocks() -> None:
    cache = MemoryBlockCache(1000, Metrics())
    cache.put("k", b"x")
    assert cache.miss_if_absent("k") is False
    assert cache.miss_if_absent("other", size_hint=7) is True
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.miss_bytes) == (0, 1, 7)
