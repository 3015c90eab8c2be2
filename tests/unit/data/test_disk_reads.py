"""Disk hits read in place, on their own threads; UFS fetches write the disk tier behind."""

from __future__ import annotations

import io
import logging
import threading
from pathlib import Path

import pytest
import trio

from cloudfs.cache.disk import DiskBlockCache
from cloudfs.cache.writebehind import DiskWriteBehind
from cloudfs.data.blocks import ObjectRef
from cloudfs.data.body import read_exact
from cloudfs.data.prefetch import ReadCursor
from cloudfs.data.reader import ObjectReader
from cloudfs.metrics import Metrics
from tests.unit.data.test_fake_store import FakeStore
from tests.unit.data.test_reader import BS, STORE_ID, Rig, payload


def warm(tmp_path: Path, data: bytes) -> tuple[FakeStore, ObjectRef]:
    """An object read once through a mount that wrote its blocks to ``tmp_path``."""
    store = FakeStore({"obj": data})
    first = Rig(store, str(tmp_path))
    ref = first.ref("obj")

    async def read_all(reader: ObjectReader) -> None:
        assert await reader.read(ref, 0, ref.size) == data

    first.run(read_all)
    return store, ref


def test_a_disk_hit_reads_just_the_range_and_leaves_memory_alone(tmp_path: Path) -> None:
    data = payload(6 * BS)
    store, ref = warm(tmp_path, data)
    second = Rig(store, str(tmp_path))  # a remount: empty memory, disk index rebuilt

    async def body(reader: ObjectReader) -> None:
        assert await reader.read(ref, 2 * BS + 10, 20) == data[2 * BS + 10 : 2 * BS + 30]
        assert second.memory.stats().blocks == 0, "a partial disk hit is not promoted"
        assert await reader.read(ref, 2 * BS + 40, 2 * BS) == data[2 * BS + 40 : 4 * BS + 40]
        assert await reader.read(ref, 5 * BS, BS) == data[5 * BS :]
        assert second.memory.stats().blocks == 2, "whole blocks read from disk are"

    second.run(body)
    assert store.calls["get_range"] == 1 and store.calls["get_stream"] == 0
    hit_bytes = second.metric("cloudfs_blockcache_hit_bytes_total", "disk")
    assert hit_bytes == 20 + 2 * BS + BS


def test_disk_hits_in_the_page_cache_cost_no_thread_hop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = payload(4 * BS)
    store, ref = warm(tmp_path, data)
    second = Rig(store, str(tmp_path))
    assert second.disk is not None
    threaded: list[str] = []
    real = second.disk.read_range

    def counting(key: str, offset: int, length: int, size_hint: int = 0) -> bytes | None:
        threaded.append(key)
        return real(key, offset, length, size_hint)

    monkeypatch.setattr(second.disk, "read_range", counting)

    async def body(reader: ObjectReader) -> None:
        for _ in range(3):
            for offset in range(0, ref.size, BS // 4):
                assert await reader.read(ref, offset, BS // 4) == data[offset : offset + BS // 4]

    second.run(body)
    assert len(threaded) == 4, "one threaded read per block (it checks and opens the file)"
    assert second.metric("cloudfs_blockcache_hits_total", "disk") == 3 * 16
    assert store.calls["get_range"] == 1


def test_fetch_on_open_leaves_a_small_file_on_disk_to_its_read(tmp_path: Path) -> None:
    data = payload(BS - 5)
    store, ref = warm(tmp_path, data)
    second = Rig(store, str(tmp_path))

    async def body(reader: ObjectReader) -> None:
        reader.fetch_on_open(ref)
        assert reader.prefetch_inflight == 0
        assert await reader.read(ref, 0, BS) == data
        assert second.memory.stats().blocks == 1, "a whole block read from disk is kept"

    second.run(body)
    assert store.calls["get_range"] == 1


def test_read_ahead_leaves_blocks_the_disk_holds_alone(tmp_path: Path) -> None:
    data = payload(12 * BS)
    store, ref = warm(tmp_path, data)
    second = Rig(store, str(tmp_path), readahead=8)

    async def body(reader: ObjectReader) -> None:
        cursor = ReadCursor()
        out = bytearray()
        for offset in range(0, ref.size, BS // 2):
            out += await reader.read(ref, offset, BS // 2, cursor)
        assert bytes(out) == data
        assert reader.prefetch_inflight == 0

    second.run(body)
    assert store.calls["get_range"] == 1 and store.calls["get_stream"] == 0
    assert second.memory.stats().blocks == 0, "served from the block files, not copied to memory"
    assert second.metric("cloudfs_blockcache_hits_total", "disk") == 24


def test_cold_blocks_count_disk_misses_and_admission_accesses(tmp_path: Path) -> None:
    data = payload(3 * BS)
    store = FakeStore({"obj": data, "one": data[:BS]})
    rig = Rig(store, str(tmp_path))
    assert rig.disk is not None
    recorded: list[str] = []
    rig.disk._admission.record = recorded.append  # type: ignore[method-assign]

    async def body(reader: ObjectReader) -> None:
        assert await reader.read(rig.ref("obj"), 0, 3 * BS) == data
        reader.fetch_on_open(rig.ref("one"))
        assert await reader.read(rig.ref("one"), 0, BS) == data[:BS]

    rig.run(body)
    assert rig.metric("cloudfs_blockcache_misses_total", "disk") == 4
    assert rig.metric("cloudfs_blockcache_miss_bytes_total", "disk") == 4 * BS
    assert len(recorded) == 4, "TinyLFU still sees every access"
    assert rig.disk.miss_if_absent(keys(rig, rig.ref("obj"))[0]) is False, "held: nothing counted"
    assert rig.metric("cloudfs_blockcache_misses_total", "disk") == 4


def test_disk_hits_do_not_wait_behind_gets(tmp_path: Path) -> None:
    cached = payload(2 * BS)
    store, ref = warm(tmp_path, cached)
    store.objects["slow"] = payload(BS, seed=3)
    slow = ObjectRef("slow", store.etag("slow"), BS)
    gate = threading.Event()
    store.on_get_range = lambda key, offset, length: gate.wait(10) if key == "slow" else None
    rig = Rig(store, str(tmp_path))

    async def main() -> None:
        async with (
            ObjectReader.running(
                store, rig.memory, rig.disk, rig.config, rig.metrics, STORE_ID,
                trio.CapacityLimiter(1),  # the one UFS thread is taken by the stuck GET
            ) as reader,
            trio.open_nursery() as nursery,
        ):  # fmt: skip
            nursery.start_soon(reader.read, slow, 0, BS)
            await trio.sleep(0.05)
            with trio.fail_after(5):
                assert await reader.read(ref, 3, 50) == cached[3:53]
            gate.set()

    trio.run(main)


class GatedDisk:
    """A disk tier whose puts wait for ``gate``."""

    def __init__(self, inner: DiskBlockCache) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.puts = 0

    @property
    def tier(self) -> str:
        return self.inner.tier

    def get(self, key: str, size_hint: int = 0) -> bytes | None:
        return self.inner.get(key, size_hint)

    def read_range(self, key: str, offset: int, length: int, size_hint: int = 0) -> bytes | None:
        return self.inner.read_range(key, offset, length, size_hint)

    def put(self, key: str, data: bytes) -> None:
        assert self.gate.wait(10)
        self.puts += 1
        self.inner.put(key, data)

    def discard(self, key: str) -> None:
        self.inner.discard(key)

    def contains(self, key: str) -> bool:
        return self.inner.contains(key)

    def read_range_nowait(self, key: str, offset: int, length: int) -> bytes | None:
        return self.inner.read_range_nowait(key, offset, length)

    def miss_if_absent(self, key: str, size_hint: int = 0) -> bool:
        return self.inner.miss_if_absent(key, size_hint)

    def stats(self):  # type: ignore[no-untyped-def]
        return self.inner.stats()


def test_the_leader_of_a_fetch_returns_before_the_disk_write(tmp_path: Path) -> None:
    data = payload(3 * BS)
    store = FakeStore({"obj": data})
    rig = Rig(store, str(tmp_path), memory_blocks=0)  # nothing stays in memory
    assert rig.disk is not None
    disk = GatedDisk(rig.disk)
    ref = rig.ref("obj")

    async def main() -> None:
        async with ObjectReader.running(
            store, rig.memory, disk, rig.config, rig.metrics, STORE_ID, trio.CapacityLimiter(4)
        ) as reader:
            with trio.fail_after(5):
                assert await reader.read(ref, 0, ref.size) == data
                assert disk.puts == 0, "returned while the block files are still being written"
                # Blocks waiting for their write are served from the queue, not fetched again.
                assert await reader.read(ref, BS, 10) == data[BS : BS + 10]
                assert store.calls["get_range"] == 1
            disk.gate.set()
            await reader.drain_disk_writes()
            assert disk.puts == 3 and all(rig.disk.contains(k) for k in keys(rig, ref))  # type: ignore[union-attr]

    trio.run(main)


def keys(rig: Rig, ref: ObjectRef) -> list[str]:
    from cloudfs.data.blocks import block_key

    return [block_key(STORE_ID, ref, i, BS) for i in range(-(-ref.size // BS))]


def test_write_behind_is_bounded_and_logs_failures(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    disk = GatedDisk(DiskBlockCache([str(tmp_path)], 100 * BS, Metrics()))
    writes = DiskWriteBehind(disk, max_pending=2)
    key = [f"{i:064x}" for i in range(4)]

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            writes.start(nursery)
            with trio.fail_after(5):
                await writes.submit([(key[0], b"a"), (key[1], b"b")])  # returns at once
            assert writes.pending_blocks == 2 and writes.pending(key[1]) == b"b"
            third_done = trio.Event()

            async def third() -> None:
                await writes.submit([(key[2], b"c")])
                third_done.set()

            nursery.start_soon(third)
            await trio.sleep(0.05)
            assert not third_done.is_set(), "a third block waits for room"
            disk.gate.set()
            with trio.fail_after(5):
                await third_done.wait()
                await writes.drain()
            assert writes.pending_blocks == 0 and disk.puts == 3

    trio.run(main)

    class Broken(GatedDisk):
        def put(self, key: str, data: bytes) -> None:
            raise RuntimeError("boom")

    broken = DiskWriteBehind(Broken(DiskBlockCache([str(tmp_path)], BS, Metrics())))

    async def failing() -> None:
        async with trio.open_nursery() as nursery:
            broken.start(nursery)
            await broken.submit([(key[3], b"d")])
            await broken.drain()
        await broken.submit([(key[3], b"d")])  # no nursery any more: inline, still logged

    with caplog.at_level(logging.WARNING):
        trio.run(failing)
    assert caplog.text.count("boom") == 2


class ChunkyStream(io.RawIOBase):
    """A body that hands out at most 7 bytes per call, through read or readinto."""

    def __init__(self, data: bytes, *, readinto: bool) -> None:
        super().__init__()
        self._data = io.BytesIO(data)
        self._readinto = readinto

    def readable(self) -> bool:
        return True

    def readinto(self, buffer):  # type: ignore[no-untyped-def, override]
        if not self._readinto:
            raise AssertionError("readinto used")
        return self._data.readinto(memoryview(buffer)[:7])

    def read(self, size: int = -1) -> bytes:
        return self._data.read(min(size, 7))


class ReadOnly:
    def __init__(self, data: bytes) -> None:
        self._inner = ChunkyStream(data, readinto=False)

    def read(self, size: int = -1) -> bytes:
        return self._inner.read(size)


@pytest.mark.parametrize("buffer", [None, bytearray(64)])
def test_read_exact_fills_a_block_from_short_reads(buffer: bytearray | None) -> None:
    data = payload(50)
    stream = ChunkyStream(data, readinto=True)
    assert read_exact(stream, 30, buffer) == data[:30]  # type: ignore[arg-type]
    assert read_exact(stream, 30, buffer) == data[30:], "short at the end"
    assert read_exact(stream, 30, buffer) == b""
    assert read_exact(ReadOnly(data), 50, buffer) == data  # type: ignore[arg-type]
