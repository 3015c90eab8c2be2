"""DiskBlockCache: checksummed files, warm restart, corruption, capacity, LRU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudfs.cache.disk import HEADER_SIZE, DiskBlockCache
from cloudfs.metrics import Metrics

BLOCK = 100
FILE = BLOCK + HEADER_SIZE


def key(i: int) -> str:
    return f"{i:064x}"


def sample(metrics: Metrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name, {"tier": "disk"})
    return 0.0 if value is None else value


def test_roundtrip_and_layout(tmp_path: Path) -> None:
    metrics = Metrics()
    cache = DiskBlockCache([str(tmp_path)], 10 * FILE, metrics)
    k = "ab" + "0" * 62
    assert cache.get(k, size_hint=BLOCK) is None
    cache.put(k, b"z" * BLOCK)
    path = tmp_path / "ab" / k
    assert path.exists() and path.stat().st_size == FILE
    assert cache.path_of(k) == str(path)
    assert cache.get(k) == b"z" * BLOCK
    assert cache.contains(k)
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.hit_bytes, stats.miss_bytes) == (1, 1, BLOCK, BLOCK)
    assert (stats.blocks, stats.bytes) == (1, FILE)
    assert sample(metrics, "cloudfs_blockcache_blocks") == 1
    assert not list(tmp_path.glob("*/*.tmp"))


def test_warm_restart(tmp_path: Path) -> None:
    first = DiskBlockCache([str(tmp_path)], 10 * FILE, Metrics())
    for i in range(5):
        first.put(key(i), bytes([i]) * BLOCK)
    (tmp_path / "00").mkdir(exist_ok=True)
    (tmp_path / "00" / (key(99) + ".deadbeef.tmp")).write_bytes(b"half")
    metrics = Metrics()
    second = DiskBlockCache([str(tmp_path)], 10 * FILE, metrics)
    assert second.stats().blocks == 5 and second.stats().bytes == 5 * FILE
    assert sample(metrics, "cloudfs_blockcache_bytes") == 5 * FILE
    for i in range(5):
        assert second.get(key(i)) == bytes([i]) * BLOCK
    assert not list(tmp_path.glob("*/*.tmp")), "leftover temp files are removed"


def test_restart_with_smaller_capacity_evicts_oldest(tmp_path: Path) -> None:
    first = DiskBlockCache([str(tmp_path)], 10 * FILE, Metrics())
    for i in range(6):
        first.put(key(i), bytes([i]) * BLOCK)
        os.utime(first.path_of(key(i)), ns=(i * 10**9, i * 10**9))
    second = DiskBlockCache([str(tmp_path)], 3 * FILE, Metrics())
    assert [second.contains(key(i)) for i in range(6)] == [False] * 3 + [True] * 3
    assert not os.path.exists(first.path_of(key(0)))


@pytest.mark.parametrize("how", ["get", "range"])
@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "header"])
def test_corrupted_block_is_a_miss_and_deleted(tmp_path: Path, damage: str, how: str) -> None:
    cache = DiskBlockCache([str(tmp_path)], 10 * FILE, Metrics())
    cache.put(key(1), b"q" * BLOCK)
    assert cache.read_range(key(1), 10, 5) == b"q" * 5  # checked and trusted from now on
    path = cache.path_of(key(1))
    mtime = os.stat(path).st_mtime_ns
    raw = bytearray(Path(path).read_bytes())
    if damage == "flip":
        raw[HEADER_SIZE + 50] ^= 0xFF
    elif damage == "truncate":
        raw = raw[:-1]
    elif damage == "empty":
        raw = bytearray()
    else:
        raw[0:4] = b"XXXX"
    Path(path).write_bytes(bytes(raw))
    # Damage in place is a change of the file: on kernels with coarse timestamps a
    # write within the same tick as ours keeps mtime, so make the change visible.
    os.utime(path, ns=(mtime + 1, mtime + 1))
    if how == "get":
        assert cache.get(key(1)) is None
    else:
        assert cache.read_range(key(1), 50, 10) is None
    assert not os.path.exists(path)
    assert not cache.contains(key(1))
    assert cache.stats().blocks == 0 and cache.stats().bytes == 0
    cache.put(key(1), b"q" * BLOCK)  # a refetch can store it again
    assert cache.get(key(1)) == b"q" * BLOCK


def test_corruption_found_after_restart(tmp_path: Path) -> None:
    DiskBlockCache([str(tmp_path)], 10 * FILE, Metrics()).put(key(2), b"r" * BLOCK)
    path = tmp_path / key(2)[:2] / key(2)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1
    path.write_bytes(bytes(raw))
    cache = DiskBlockCache([str(tmp_path)], 10 * FILE, Metrics())
    assert cache.contains(key(2))
    assert cache.get(key(2)) is None
    assert not path.exists()


def test_capacity_and_lru_eviction_with_three_times_the_data(tmp_path: Path) -> None:
    metrics = Metrics()
    cache = DiskBlockCache([str(tmp_path)], 10 * FILE, metrics)
    for i in range(10):
        cache.put(key(i), bytes([i]) * BLOCK)
    assert cache.get(key(0)) is not None  # refresh block 0
    for i in range(10, 30):
        cache.put(key(i), bytes([i]) * BLOCK)
        assert cache.stats().bytes <= 10 * FILE
        if i == 10:  # the refreshed block 0 outlives 1, the least recently used
            assert cache.contains(key(0)) and not cache.contains(key(1))
    files = [p for p in tmp_path.glob("*/*") if p.is_file()]
    assert len(files) == 10
    assert sum(p.stat().st_size for p in files) <= 10 * FILE
    assert cache.stats().evictions == 20
    assert sample(metrics, "cloudfs_blockcache_evictions_total") == 20
    held = [i for i in range(30) if cache.contains(key(i))]
    assert held == list(range(20, 30))


def test_lru_refresh_protects_recently_read_block(tmp_path: Path) -> None:
    cache = DiskBlockCache([str(tmp_path)], 3 * FILE, Metrics())
    for i in range(3):
        cache.put(key(i), b"x" * BLOCK)
    assert cache.get(key(0)) is not None
    cache.put(key(3), b"x" * BLOCK)
    assert cache.contains(key(0)) and not cache.contains(key(1))


def test_discard_oversize_and_bad_keys(tmp_path: Path) -> None:
    cache = DiskBlockCache([str(tmp_path)], 2 * FILE, Metrics())
    cache.put(key(1), b"x" * BLOCK)
    cache.discard(key(1))
    cache.discard(key(1))
    assert not os.path.exists(cache.path_of(key(1)))
    cache.put(key(2), b"x" * (3 * BLOCK))  # larger than the whole cache: declined
    assert not cache.contains(key(2))
    for bad in ("../etc", "a", "a/b" + "0" * 10, ""):
        with pytest.raises(ValueError):
            cache.put(bad, b"x")


def test_missing_file_is_a_miss(tmp_path: Path) -> None:
    cache = DiskBlockCache([str(tmp_path)], 2 * FILE, Metrics())
    cache.put(key(1), b"x" * BLOCK)
    os.unlink(cache.path_of(key(1)))
    assert cache.get(key(1)) is None
    assert cache.stats().blocks == 0


def test_blocks_spread_over_several_directories(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "ssd1"), str(tmp_path / "ssd2")]
    cache = DiskBlockCache(dirs, 40 * FILE, Metrics())
    for i in range(40):
        cache.put(key(i), bytes([i]) * BLOCK)
    per_dir = [len(list(Path(d).glob("*/*"))) for d in dirs]
    assert all(n > 5 for n in per_dir) and sum(per_dir) <= 40
    assert cache.stats().capacity_bytes == 40 * FILE
    for i in range(40):
        data = cache.get(key(i))
        assert data is None or data == bytes([i]) * BLOCK
    again = DiskBlockCache(dirs, 40 * FILE, Metrics())  # warm restart finds both halves
    assert again.stats().blocks == cache.stats().blocks


def test_each_directory_holds_its_share(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    cache = DiskBlockCache(dirs, 10 * FILE, Metrics())
    for i in range(100):
        cache.put(key(i), b"x" * BLOCK)
    for d in dirs:
        assert len(list(Path(d).glob("*/*"))) <= 5


def test_blocks_of_a_removed_directory_layout_are_dropped(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    cache = DiskBlockCache(dirs, 40 * FILE, Metrics())
    for i in range(20):
        cache.put(key(i), b"x" * BLOCK)
    alone = DiskBlockCache(dirs[1:], 40 * FILE, Metrics())  # the other half would be misplaced
    for i in range(20):
        assert alone.get(key(i)) in (None, b"x" * BLOCK)


class FakeStatvfs:
    """A filesystem of 100 blocks of FILE bytes whose free space the test controls."""

    def __init__(self, free_blocks: int) -> None:
        self.free = free_blocks

    def __call__(self, path: str) -> os.statvfs_result:
        return os.statvfs_result((FILE, FILE, 100, self.free, self.free, 0, 0, 0, 0, 255))


def test_free_space_floor_evicts_our_blocks_first(tmp_path: Path) -> None:
    fs = FakeStatvfs(free_blocks=50)
    cache = DiskBlockCache([str(tmp_path)], 100 * FILE, Metrics(), min_free_ratio=0.2, statvfs=fs)
    for i in range(5):
        cache.put(key(i), b"x" * BLOCK)
        fs.free -= 1
    fs.free = 20  # someone else filled the disk down to the floor
    cache.put(key(99), b"y" * BLOCK)
    assert cache.contains(key(99))
    assert not cache.contains(key(0))  # the oldest block made room
    assert cache.stats().evictions == 1


def test_free_space_floor_declines_when_nothing_of_ours_is_left(tmp_path: Path) -> None:
    cache = DiskBlockCache(
        [str(tmp_path)], 100 * FILE, Metrics(), min_free_ratio=0.2, statvfs=FakeStatvfs(10)
    )
    cache.put(key(1), b"x" * BLOCK)
    assert not cache.contains(key(1))
    assert cache.get(key(1)) is None


def _count_whole_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every whole-file checked read of the disk tier."""
    import cloudfs.cache.disk as disk_module

    calls: list[str] = []
    real = disk_module.read_verified

    def counting(path: str):  # type: ignore[no-untyped-def]
        calls.append(path)
        return real(path)

    monkeypatch.setattr(disk_module, "read_verified", counting)
    return calls


def test_range_reads_are_checked_once_then_read_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _count_whole_reads(monkeypatch)
    data = bytes(range(BLOCK))
    DiskBlockCache([str(tmp_path)], 10 * FILE, Metrics()).put(key(3), data)
    metrics = Metrics()
    cache = DiskBlockCache([str(tmp_path)], 10 * FILE, metrics)  # a restart: nothing trusted
    assert cache.read_range(key(3), 10, 20) == data[10:30]
    assert len(whole) == 1, "the first read after a restart checks the whole file"
    assert cache.read_range(key(3), 90, 50) == data[90:], "short at the block's end"
    assert cache.read_range(key(3), 0, BLOCK) == data
    assert cache.get(key(3)) == data
    assert len(whole) == 1, "then ranges and gets are read in place, unchecked"
    assert sample(metrics, "cloudfs_blockcache_hit_bytes_total") == 20 + 10 + 2 * BLOCK
    cache.put(key(4), data)  # written by this process: checked as it was written
    assert cache.read_range(key(4), 1, 2) == data[1:3]
    assert len(whole) == 1
    assert cache.read_range(key(9), 0, 10, size_hint=10) is None
    assert cache.stats().misses == 1


def test_a_block_file_replaced_since_its_check_is_checked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _count_whole_reads(monkeypatch)
    cache = DiskBlockCache([str(tmp_path)], 10 * FILE, Metrics())
    cache.put(key(5), b"a" * BLOCK)
    path = cache.path_of(key(5))
    good = Path(path).read_bytes()
    os.unlink(path)
    Path(path).write_bytes(good)  # same bytes, another inode: no longer the file we checked
    assert cache.read_range(key(5), 0, 4) == b"aaaa"
    assert len(whole) == 1
    assert cache.read_range(key(5), 4, 4) == b"aaaa"
    assert len(whole) == 1, "the new file is trusted once checked"


def test_evicted_or_discarded_blocks_lose_their_trust(tmp_path: Path) -> None:
    cache = DiskBlockCache([str(tmp_path)], 2 * FILE, Metrics())
    cache.put(key(1), b"x" * BLOCK)
    cache.put(key(2), b"y" * BLOCK)
    cache.put(key(3), b"z" * BLOCK)  # evicts key(1)
    assert cache.read_range(key(1), 0, 1) is None
    cache.discard(key(2))
    assert cache.read_range(key(2), 0, 1) is None
    with pytest.raises(ValueError):
        cache.read_range(key(3), -1, 1)


def test_read_range_nowait_reads_open_checked_files_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cloudfs.cache.disk as disk_module

    monkeypatch.setattr(disk_module, "OPEN_FILES", 2)
    metrics = Metrics()
    cache = DiskBlockCache([str(tmp_path)], 10 * FILE, metrics)
    data = bytes(range(BLOCK))
    for i in range(4):
        cache.put(key(i), data)
    assert cache.read_range_nowait(key(0), 0, 10) is None, "not opened yet: use read_range"
    assert cache.stats().hits == 0
    assert cache.read_range(key(0), 0, 10) == data[:10]  # opens the checked file
    assert cache.read_range_nowait(key(0), 20, 30) == data[20:50]  # just written: cached
    assert cache.read_range_nowait(key(0), 90, 30) == data[90:], "short at the end"
    assert cache.stats().hits == 3
    path = cache.path_of(key(0))
    mtime = os.stat(path).st_mtime_ns
    os.utime(path, ns=(mtime + 1, mtime + 1))  # changed since checked: not trusted
    assert cache.read_range_nowait(key(0), 0, 10) is None
    assert cache.read_range(key(0), 0, 10) == data[:10]  # checked again, reopened
    assert cache.read_range_nowait(key(0), 0, 10) == data[:10]
    for i in (1, 2):
        cache.read_range(key(i), 0, 1)
    assert cache.read_range_nowait(key(0), 0, 10) is None, "closed: only 2 files stay open"
    assert cache.read_range_nowait(key(2), 0, 10) == data[:10]
    cache.discard(key(2))
    assert cache.read_range_nowait(key(2), 0, 10) is None
    assert _open_files_under(tmp_path) == 1
    del cache
    import gc

    gc.collect()
    assert _open_files_under(tmp_path) == 0, "a dropped cache closes its files"


def _open_files_under(directory: Path) -> int:
    """Descriptors of this process open on files below ``directory`` (other tests'
    descriptors come and go meanwhile: count only ours)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(f"{directory}/")
    return count
