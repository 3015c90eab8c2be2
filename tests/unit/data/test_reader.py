"""ObjectReader over a fake store: exact bytes, shared fetches, read-ahead, tiers, errors."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudfs.cache.disk import DiskBlockCache
from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.config import CacheConfig
from cloudfs.data.blocks import ObjectRef, block_key
from cloudfs.data.failfast import FAIL_FAST_SECONDS
from cloudfs.data.ledger import PrefetchLedger
from cloudfs.data.prefetch import ReadCursor
from cloudfs.data.reader import ObjectReader
from cloudfs.errors import InvalidArgument, NotFound, RemoteIOError
from cloudfs.metrics import Metrics
from tests.unit.data.test_fake_store import FakeStore

BS = 64
STORE_ID = "fake://bucket"


def payload(size: int, seed: int = 0) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(size))


class Rig:
    """A reader over a fake store with a memory tier and an optional disk tier."""

    def __init__(
        self,
        store: FakeStore,
        disk_dir: str | None,
        *,
        readahead: int = 4,
        memory_blocks: int = 1000,
        max_prefetch_blocks: int | None = None,
        mode: str = "stream",
    ) -> None:
        self.store = store
        self.metrics = Metrics()
        self.config = CacheConfig(
            cache_dir=disk_dir or "/nonexistent",
            block_size=BS,
            memory_bytes=memory_blocks * BS,
            disk_bytes=10_000 * BS,
            readahead_blocks=readahead,
            readahead_mode=mode,
            readahead_part_bytes=2 * BS,
        )
        self.ledger = PrefetchLedger(self.metrics)
        self.memory = MemoryBlockCache(
            self.config.memory_bytes, self.metrics, on_drop=self.ledger.dropped
        )
        self.disk = (
            DiskBlockCache([disk_dir], self.config.disk_bytes, self.metrics) if disk_dir else None
        )
        self.max_prefetch_blocks = max_prefetch_blocks

    def ref(self, key: str) -> ObjectRef:
        return ObjectRef(key, self.store.etag(key), len(self.store.objects[key]))

    def run(self, body: Callable[[ObjectReader], Awaitable[None]]) -> None:
        async def main() -> None:
            async with ObjectReader.running(
                self.store,
                self.memory,
                self.disk,
                self.config,
                self.metrics,
                STORE_ID,
                trio.CapacityLimiter(8),
                max_prefetch_blocks=self.max_prefetch_blocks,
                ledger=self.ledger,
            ) as reader:
                await body(reader)

        trio.run(main)

    def metric(self, name: str, tier: str | None = None) -> float:
        labels = {"tier": tier} if tier else {}
        value = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


async def read_sequentially(reader: ObjectReader, ref: ObjectRef, data: bytes, step: int) -> None:
    """Read ``ref`` start to end with one cursor, ``step`` bytes at a time; check the bytes."""
    cursor = ReadCursor()
    out = bytearray()
    for offset in range(0, ref.size, step):
        out += await reader.read(ref, offset, step, cursor)
        await trio.sleep(0.0005)  # let read-ahead run, as real I/O would
    assert bytes(out) == data


@settings(max_examples=60, deadline=None)
@given(
    size=st.sampled_from([0, 1, BS - 1, BS, BS + 1, 5 * BS, 7 * BS + 13]),
    reads=st.lists(st.tuples(st.integers(0, 9 * BS), st.integers(0, 4 * BS)), max_size=12),
    use_disk=st.booleans(),
    sequential_cursor=st.booleans(),
)
def test_random_reads_are_byte_exact(
    size: int, reads: list[tuple[int, int]], use_disk: bool, sequential_cursor: bool
) -> None:
    data = payload(size)
    with tempfile.TemporaryDirectory() as tmp:
        rig = Rig(FakeStore({"obj": data}), tmp if use_disk else None, memory_blocks=3)
        ref = rig.ref("obj")

        async def body(reader: ObjectReader) -> None:
            cursor = ReadCursor()
            for offset, length in reads:
                for _ in range(2):  # cold, then from the tiers
                    got = await reader.read(ref, offset, length, cursor)
                    assert got == data[offset : offset + length]
            if sequential_cursor:
                seq = ReadCursor()
                out = bytearray()
                for offset in range(0, size + 10, 10):
                    out += await reader.read(ref, offset, 10, seq)
                assert bytes(out) == data

        rig.run(body)


def test_concurrent_readers_of_one_block_share_one_get() -> None:
    rig = Rig(FakeStore({"obj": payload(10 * BS)}), None)
    rig.store.delay = 0.05
    ref = rig.ref("obj")

    async def body(reader: ObjectReader) -> None:
        results: list[bytes] = []

        async def one(offset: int) -> None:
            results.append(await reader.read(ref, offset, 8))

        async with trio.open_nursery() as nursery:
            for i in range(10):
                nursery.start_soon(one, 3 * BS + i)
        assert sorted(map(bytes, results)) == sorted(
            payload(10 * BS)[3 * BS + i : 3 * BS + i + 8] for i in range(10)
        )

    rig.run(body)
    assert rig.store.calls["get_range"] == 1
    assert rig.store.ranges == [("obj", 3 * BS, BS)]


def test_sequential_reader_of_a_large_object_is_fed_by_one_open_get(tmp_path: Path) -> None:
    size = 64 * BS
    data = payload(size)
    rig = Rig(FakeStore({"obj": data}), str(tmp_path), readahead=8)
    ref = rig.ref("obj")

    rig.run(lambda reader: read_sequentially(reader, ref, data, step=16))
    assert rig.store.calls["get_stream"] == 1, "one GET from offset 0, the first block included"
    assert rig.store.ranges == []
    assert rig.metric("cloudfs_prefetch_bytes_total") == size
    used = rig.metric("cloudfs_prefetch_used_bytes_total")
    assert used == size, "the sequential reader read what was fetched ahead"
    assert rig.metric("cloudfs_prefetch_wasted_bytes_total") == 0


def test_stream_takes_blocks_the_disk_tier_holds_from_disk(tmp_path: Path) -> None:
    size = 32 * BS
    data = payload(size)
    store = FakeStore({"obj": data})
    first = Rig(store, str(tmp_path), readahead=8)
    ref = first.ref("obj")

    async def read_then_settle(reader: ObjectReader) -> None:
        await read_sequentially(reader, ref, data, step=BS // 2)
        # Disk writes run behind the reader and are dropped when it stops
        # (a cache may lose its last blocks at unmount); let them land.
        assert first.disk is not None
        with trio.fail_after(30):
            while first.disk.stats().blocks < 32:  # noqa: ASYNC110 (threads write them)
                await trio.sleep(0.01)

    first.run(read_then_settle)
    calls = dict(store.calls)
    second = Rig(store, str(tmp_path), readahead=8)  # a remount: empty memory, warm disk
    second.run(lambda reader: read_sequentially(reader, ref, data, step=BS // 2))
    assert dict(store.calls) == calls, "nothing fetched from the store again"
    assert second.metric("cloudfs_blockcache_hits_total", "disk") >= 31


def test_ranges_mode_reads_ahead_with_parallel_ranged_gets() -> None:
    size = 64 * BS
    data = payload(size)
    rig = Rig(FakeStore({"obj": data}), None, readahead=8, mode="ranges")
    rig.store.delay = 0.002
    ref = rig.ref("obj")

    rig.run(lambda reader: read_sequentially(reader, ref, data, step=16))
    assert rig.store.calls["get_stream"] == 0
    assert sum(length for _, _, length in rig.store.ranges) == size, "no block fetched twice"
    assert max(length for _, _, length in rig.store.ranges) == 2 * BS, "parts of 2 blocks"
    assert rig.store.max_concurrent_ranges >= 2, "parts of one batch are fetched at once"


def test_small_objects_are_read_ahead_with_growing_ranged_gets() -> None:
    size = 3 * BS  # below STREAM_MIN_BLOCKS
    data = payload(size)
    rig = Rig(FakeStore({"obj": data}), None, readahead=8)
    ref = rig.ref("obj")

    rig.run(lambda reader: read_sequentially(reader, ref, data, step=16))
    assert rig.store.calls["get_stream"] == 0
    assert sum(length for _, _, length in rig.store.ranges) == size, "no block fetched twice"


def test_a_seek_opens_a_new_stream_and_a_failed_stream_does_not_stick() -> None:
    size = 40 * BS
    data = payload(size)
    rig = Rig(FakeStore({"obj": data}), None, readahead=4)
    ref = rig.ref("obj")

    async def scan(reader: ObjectReader, start: int, stop: int) -> None:
        cursor = ReadCursor()
        for offset in range(start, stop, BS // 2):
            assert (
                await reader.read(ref, offset, BS // 2, cursor) == data[offset : offset + BS // 2]
            )
            await trio.sleep(0.001)

    async def body(reader: ObjectReader) -> None:
        await scan(reader, 0, 10 * BS)
        rig.store.fail_next("get_stream", RemoteIOError("stream refused"))
        try:  # a new cursor whose first stream fails: a read waiting for it gets the error
            await scan(reader, 20 * BS, 30 * BS)
        except RemoteIOError:
            await trio.sleep(FAIL_FAST_SECONDS)
            await scan(reader, 20 * BS, 30 * BS)  # the failure does not stick
        await scan(reader, 30 * BS, size)

    rig.run(body)
    assert rig.store.calls["get_stream"] >= 3


def test_prefetch_dropped_unread_counts_as_wasted() -> None:
    size = 32 * BS
    rig = Rig(FakeStore({"obj": payload(size)}), None, readahead=8, memory_blocks=4)
    ref = rig.ref("obj")

    async def body(reader: ObjectReader) -> None:
        cursor = ReadCursor()
        for offset in range(0, 4 * BS, BS):  # start a stream, then stop reading
            await reader.read(ref, offset, BS, cursor)
            await trio.sleep(0.01)
        await trio.sleep(0.05)
        other = ReadCursor()  # a seek elsewhere flushes the small memory tier
        await reader.read(ref, 20 * BS, 4 * BS, other)

    rig.run(body)
    assert rig.metric("cloudfs_prefetch_wasted_bytes_total") > 0
    fetched = rig.metric("cloudfs_prefetch_bytes_total")
    used = rig.metric("cloudfs_prefetch_used_bytes_total")
    wasted = rig.metric("cloudfs_prefetch_wasted_bytes_total")
    assert used + wasted <= fetched


def test_small_object_is_fetched_whole_on_first_read() -> None:
    rig = Rig(FakeStore({"small": payload(50)}), None)
    ref = rig.ref("small")

    async def body(reader: ObjectReader) -> None:
        assert await reader.read(ref, 10, 5, ReadCursor()) == payload(50)[10:15]
        assert await reader.read(ref, 30, 100, ReadCursor()) == payload(50)[30:]
        assert await reader.read(ref, 50, 10) == b""

    rig.run(body)
    assert rig.store.ranges == [("small", 0, 50)]


def test_a_one_block_object_is_fetched_on_open() -> None:
    rig = Rig(FakeStore({"small": payload(50), "big": payload(3 * BS)}), None)
    small, big = rig.ref("small"), rig.ref("big")

    async def body(reader: ObjectReader) -> None:
        reader.fetch_on_open(small)
        reader.fetch_on_open(big)  # more than one block: left to read-ahead
        await trio.sleep(0.05)
        assert rig.store.ranges == [("small", 0, 50)]
        assert await reader.read(small, 0, 100, ReadCursor()) == payload(50)
        reader.fetch_on_open(small)  # already in memory: nothing to do

    rig.run(body)
    assert rig.store.ranges == [("small", 0, 50)]
    assert rig.metric("cloudfs_prefetch_used_bytes_total") == 50


def test_full_block_reads_are_not_copied() -> None:
    rig = Rig(FakeStore({"obj": payload(3 * BS)}), None)
    ref = rig.ref("obj")

    async def body(reader: ObjectReader) -> None:
        first = await reader.read(ref, BS, BS)
        again = await reader.read(ref, BS, BS)
        assert first is again
        assert rig.memory.get(block_key(STORE_ID, ref, 1, BS)) is first

    rig.run(body)


def test_disk_tier_survives_restart_and_promotes_to_memory(tmp_path: Path) -> None:
    data = payload(6 * BS)
    store = FakeStore({"obj": data})
    first = Rig(store, str(tmp_path))
    ref = first.ref("obj")

    async def read_all(reader: ObjectReader) -> None:
        assert await reader.read(ref, 0, 6 * BS) == data

    first.run(read_all)
    assert store.calls["get_range"] == 1
    second = Rig(store, str(tmp_path))  # a remount: new memory, disk index rebuilt
    second.run(read_all)
    second.run(read_all)
    assert store.calls["get_range"] == 1
    assert second.metric("cloudfs_blockcache_hits_total", "disk") == 6
    assert second.metric("cloudfs_blockcache_hits_total", "memory") == 6


def test_corrupted_disk_block_is_refetched(tmp_path: Path) -> None:
    data = payload(2 * BS)
    store = FakeStore({"obj": data})
    first = Rig(store, str(tmp_path))
    ref = first.ref("obj")

    async def read_all(reader: ObjectReader) -> None:
        assert await reader.read(ref, 0, 2 * BS) == data

    first.run(read_all)
    assert first.disk is not None
    path = first.disk.path_of(block_key(STORE_ID, ref, 1, BS))
    raw = bytearray(Path(path).read_bytes())
    raw[-3] ^= 0x55
    Path(path).write_bytes(bytes(raw))
    second = Rig(store, str(tmp_path))
    second.run(read_all)
    assert store.ranges[-1] == ("obj", BS, BS)
    assert store.calls["get_range"] == 2
    third = Rig(store, str(tmp_path))  # the refetched block was written back intact
    third.run(read_all)
    assert store.calls["get_range"] == 2
    assert os.path.exists(path)


def test_store_errors_propagate_unchanged_and_do_not_stick() -> None:
    rig = Rig(FakeStore({"obj": payload(3 * BS)}), None)
    ref = rig.ref("obj")
    error = RemoteIOError("origin down")
    rig.store.fail_next("get_range", error)

    async def body(reader: ObjectReader) -> None:
        with pytest.raises(RemoteIOError) as caught:
            await reader.read(ref, 0, 10)
        assert caught.value is error
        # right after a failure the same object fails fast (the kernel retries a
        # failed read-ahead at once; one round of timeouts is enough) ...
        with pytest.raises(RemoteIOError):
            await reader.read(ref, 0, 10)
        assert rig.store.calls["get_range"] == 1
        # ... and a moment later it is fetched again
        await trio.sleep(FAIL_FAST_SECONDS + 0.1)
        assert await reader.read(ref, 0, 10) == payload(3 * BS)[:10]
        with pytest.raises(NotFound):
            await reader.read(ObjectRef("gone", "e", 10), 0, 10)
        with pytest.raises(InvalidArgument):
            await reader.read(ref, -1, 10)

    rig.run(body)


def test_waiters_share_a_foreground_error() -> None:
    rig = Rig(FakeStore({"obj": payload(3 * BS)}), None)
    rig.store.delay = 0.05
    rig.store.fail_next("get_range", RemoteIOError("boom"))
    ref = rig.ref("obj")

    async def body(reader: ObjectReader) -> None:
        errors: list[BaseException] = []

        async def one() -> None:
            try:
                await reader.read(ref, 0, 10)
            except RemoteIOError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(one)
        assert len(errors) == 4

    rig.run(body)
    assert rig.store.calls["get_range"] == 1


def test_a_failed_prefetch_hands_its_error_to_waiting_reads_and_does_not_stick() -> None:
    data = payload(3 * BS)
    rig = Rig(FakeStore({"obj": data}), None)
    ref = rig.ref("obj")
    failed = threading.Event()

    def fail_first_prefetch(key: str, offset: int, length: int) -> None:
        if offset == BS and not failed.is_set():
            failed.set()
            threading.Event().wait(0.05)  # the next read arrives and waits on this fetch
            raise RemoteIOError("prefetch failed")

    rig.store.on_get_range = fail_first_prefetch

    async def body(reader: ObjectReader) -> None:
        cursor = ReadCursor()
        assert await reader.read(ref, 0, 16, cursor) == data[:16]
        await trio.sleep(0.01)  # the prefetch of block 1 is now in flight
        with pytest.raises(RemoteIOError):  # the store's answer after its own retries
            await reader.read(ref, BS, 16, cursor)
        await trio.sleep(FAIL_FAST_SECONDS)
        assert await reader.read(ref, BS, 16, ReadCursor()) == data[BS : BS + 16]

    rig.run(body)
    assert failed.is_set()
    assert [r for r in rig.store.ranges if r[1] == BS] == [("obj", BS, BS), ("obj", BS, BS)]


def test_prefetch_memory_is_bounded_per_cursor_and_globally() -> None:
    objects = {f"o{i}": payload(40 * BS, i) for i in range(4)}
    rig = Rig(FakeStore(objects), None, readahead=4, max_prefetch_blocks=6)
    cursors = [ReadCursor() for _ in objects]
    peaks = {"global": 0, "cursor": 0}
    holder: list[ObjectReader] = []

    def observe(key: str, offset: int, length: int) -> None:
        peaks["global"] = max(peaks["global"], holder[0].prefetch_inflight)
        peaks["cursor"] = max(peaks["cursor"], *(c.inflight_blocks for c in cursors))
        threading.Event().wait(0.002)

    rig.store.on_get_range = observe

    async def body(reader: ObjectReader) -> None:
        holder.append(reader)

        async def scan(key: str, cursor: ReadCursor) -> None:
            ref = rig.ref(key)
            out = bytearray()
            for offset in range(0, ref.size, 32):
                out += await reader.read(ref, offset, 32, cursor)
            assert bytes(out) == objects[key]

        async with trio.open_nursery() as nursery:
            for key, cursor in zip(objects, cursors, strict=True):
                nursery.start_soon(scan, key, cursor)

    rig.run(body)
    assert 0 < peaks["global"] <= 6
    assert 0 < peaks["cursor"] <= 4


def test_random_reads_do_not_prefetch() -> None:
    rig = Rig(FakeStore({"obj": payload(40 * BS)}), None)
    ref = rig.ref("obj")

    async def body(reader: ObjectReader) -> None:
        cursor = ReadCursor()
        for block in (7, 30, 2, 19, 11):
            await reader.read(ref, block * BS + 5, 10, cursor)
            await trio.sleep(0.01)
            assert cursor.window == 0
        assert reader.prefetch_inflight == 0

    rig.run(body)
    assert len(rig.store.ranges) == 5


def test_prefetch_whole_fills_disk_with_one_stream(tmp_path: Path) -> None:
    data = payload(10 * BS + 7)
    rig = Rig(FakeStore({"obj": data}), str(tmp_path))
    ref = rig.ref("obj")
    fetched: list[int] = []

    async def body(reader: ObjectReader) -> None:
        assert await reader.read(ref, 3 * BS, 1) == data[3 * BS : 3 * BS + 1]  # block 3 cached
        fetched.append(await reader.prefetch_whole(ref))
        fetched.append(await reader.prefetch_whole(ref))
        assert await reader.read(ref, 0, len(data)) == data

    rig.run(body)
    assert fetched == [len(data) - BS, 0]
    assert rig.store.calls["get_stream"] == 2  # blocks 0..2 and 4..10
    assert rig.store.calls["get_range"] == 1  # block 3, by the read
    assert rig.disk is not None and rig.disk.stats().blocks == 11


def test_prefetch_whole_without_disk_fills_memory() -> None:
    data = payload(5 * BS)
    rig = Rig(FakeStore({"obj": data}), None)
    ref = rig.ref("obj")

    async def body(reader: ObjectReader) -> None:
        assert await reader.prefetch_whole(ref) == len(data)

    rig.run(body)
    assert rig.memory.stats().blocks == 5
    assert rig.metric("cloudfs_prefetch_bytes_total") == len(data)


def test_changed_object_is_an_error_and_new_etag_misses_old_blocks() -> None:
    store = FakeStore({"obj": payload(3 * BS)})
    rig = Rig(store, None)
    old = rig.ref("obj")

    async def body(reader: ObjectReader) -> None:
        assert await reader.read(old, 0, 3 * BS) == payload(3 * BS)
        store.objects["obj"] = payload(2 * BS, seed=9)
        assert await reader.read(old, 0, 3 * BS) == payload(3 * BS)  # cached version
        new = rig.ref("obj")
        assert await reader.read(new, 0, 3 * BS) == payload(2 * BS, seed=9)
        with pytest.raises(RemoteIOError):
            await reader.read(ObjectRef("obj", "stale", 3 * BS), 0, 3 * BS)

    rig.run(body)


def test_leaving_running_cancels_slow_prefetch() -> None:
    rig = Rig(FakeStore({"obj": payload(20 * BS)}), None)
    ref = rig.ref("obj")
    rig.store.on_get_range = lambda key, offset, length: (
        threading.Event().wait(0.3) if offset > 0 else None
    )
    holder: list[ObjectReader] = []

    async def body(reader: ObjectReader) -> None:
        holder.append(reader)
        await reader.read(ref, 0, 10, ReadCursor())
        assert reader.prefetch_inflight == 1  # block 1 is still being fetched

    started = time.monotonic()
    rig.run(body)
    assert time.monotonic() - started < 2
    assert holder[0].prefetch_inflight == 0


def test_reader_without_nursery_reads_without_prefetch() -> None:
    rig = Rig(FakeStore({"obj": payload(8 * BS)}), None)
    ref = rig.ref("obj")

    async def main() -> None:
        reader = ObjectReader(
            rig.store, rig.memory, None, rig.config, rig.metrics, STORE_ID, trio.CapacityLimiter(2)
        )
        cursor = ReadCursor()
        for offset in range(0, 8 * BS, BS):
            assert (
                await reader.read(ref, offset, BS, cursor) == payload(8 * BS)[offset : offset + BS]
            )
        assert reader.prefetch_inflight == 0

    trio.run(main)
    assert len(rig.store.ranges) == 8
