"""StagedFile: copy-on-write over a base object, truncate, materialize, upload, close."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.config import CacheConfig
from cloudfs.data.blocks import ObjectRef
from cloudfs.data.reader import ObjectReader
from cloudfs.data.space import StagingSpace
from cloudfs.data.staging import StagedFile
from cloudfs.errors import FsError, NoSpace, NotFound
from cloudfs.metrics import Metrics
from tests.unit.data.test_fake_store import FakeStore

BS = 64


def payload(size: int, seed: int = 0) -> bytes:
    return bytes((i * 13 + seed) % 251 for i in range(size))


def run_staged(
    store: FakeStore,
    staging_dir: str,
    body: Callable[[ObjectReader, trio.CapacityLimiter], Awaitable[None]],
    *,
    memory_blocks: int = 100,
) -> None:
    metrics = Metrics()
    config = CacheConfig(cache_dir=staging_dir, block_size=BS, memory_bytes=memory_blocks * BS)
    memory = MemoryBlockCache(config.memory_bytes, metrics)

    async def main() -> None:
        limiter = trio.CapacityLimiter(4)
        async with ObjectReader.running(
            store, memory, None, config, metrics, "fake", limiter
        ) as reader:
            await body(reader, limiter)

    trio.run(main)


def base_ref(store: FakeStore, key: str) -> ObjectRef:
    return ObjectRef(key, store.etag(key), len(store.objects[key]))


def test_copy_on_write_into_the_middle(tmp_path: Path) -> None:
    base = payload(3 * BS)
    store = FakeStore({"f": base})
    expected = bytearray(base)
    expected[BS - 5 : BS + 10] = b"W" * 15

    async def body(reader: ObjectReader, limiter: trio.CapacityLimiter) -> None:
        f = await StagedFile.open(str(tmp_path), "1", base_ref(store, "f"), reader, limiter)
        assert not f.dirty and f.size == 3 * BS
        assert await f.pwrite(BS - 5, b"W" * 15) == 15
        assert f.dirty
        assert await f.pread(0, 10 * BS) == bytes(expected)
        assert await f.pread(BS - 8, 20) == bytes(expected[BS - 8 : BS + 12])
        await f.close()

    run_staged(store, str(tmp_path), body, memory_blocks=0)
    # Blocks 0 and 1 were partly overwritten, so each was filled from the base
    # once; block 2 was only read through; nothing was fetched twice.
    assert sorted((o, n) for _, o, n in store.ranges) == [(0, BS), (BS, BS), (2 * BS, BS)]


def test_full_block_overwrite_fetches_nothing(tmp_path: Path) -> None:
    base = payload(3 * BS + 10)
    store = FakeStore({"f": base})

    async def body(reader: ObjectReader, limiter: trio.CapacityLimiter) -> None:
        f = await StagedFile.open(str(tmp_path), "1", base_ref(store, "f"), reader, limiter)
        await f.pwrite(BS, b"x" * BS)
        await f.pwrite(3 * BS, b"y" * 20)  # covers the short last block and grows the file
        assert store.calls["get_range"] == 0
        assert await f.pread(BS, BS) == b"x" * BS
        assert f.size == 3 * BS + 20
        await f.close()

    run_staged(store, str(tmp_path), body)


def test_truncate_down_then_up_reads_zeros(tmp_path: Path) -> None:
    base = payload(3 * BS)
    store = FakeStore({"f": base})

    async def body(reader: ObjectReader, limiter: trio.CapacityLimiter) -> None:
        f = await StagedFile.open(str(tmp_path), "1", base_ref(store, "f"), reader, limiter)
        await f.truncate(BS + 7)
        assert f.dirty and f.size == BS + 7
        await f.truncate(3 * BS)
        data = await f.pread(0, 3 * BS)
        assert data == base[: BS + 7] + bytes(2 * BS - 7)
        await f.pwrite(2 * BS + 1, b"z")  # a write in the zeroed tail keeps the zeros
        expected = bytearray(base[: BS + 7] + bytes(2 * BS - 7))
        expected[2 * BS + 1] = ord("z")
        assert await f.pread(0, 4 * BS) == bytes(expected)
        await f.upload(store, "f")
        assert store.objects["f"] == bytes(expected)
        await f.close()

    run_staged(store, str(tmp_path), body)


def test_o_trunc_ignores_the_base(tmp_path: Path) -> None:
    store = FakeStore({"f": payload(3 * BS)})

    async def body(reader: ObjectReader, limiter: trio.CapacityLimiter) -> None:
        f = await StagedFile.open(
            str(tmp_path), "1", base_ref(store, "f"), reader, limiter, truncate=True
        )
        assert f.size == 0 and f.dirty and f.base is None
        assert await f.pread(0, 100) == b""
        await f.truncate(10)
        assert await f.pread(0, 100) == bytes(10)
        await f.close()

    run_staged(store, str(tmp_path), body)
    assert store.calls["get_range"] == 0


def test_new_file_is_dirty_and_uploads(tmp_path: Path) -> None:
    store = FakeStore()
    paths: list[str] = []

    async def body(reader: ObjectReader, limiter: trio.CapacityLimiter) -> None:
        f = await StagedFile.open(str(tmp_path), "7", None, reader, limiter, new=True)
        paths.append(f.path)
        assert f.dirty and f.size == 0
        await f.pwrite(100, b"tail")
        assert await f.pread(0, 200) == bytes(100) + b"tail"
        info = await f.upload(store, "dir/new.bin")
        assert not f.dirty and info.size == 104
        await f.close()
        await f.close()
        with pytest.raises(FsError) as caught:
            await f.pread(0, 1)
        assert caught.value.errno == errno.EBADF

    run_staged(store, str(tmp_path), body)
    assert store.objects["dir/new.bin"] == bytes(100) + b"tail"
    assert paths and not os.path.exists(paths[0])


def test_upload_writes_complete_bytes_and_survives_base_deletion(tmp_path: Path) -> None:
    base = payload(5 * BS + 3)
    store = FakeStore({"f": base})
    expected = bytearray(base)
    expected[2 * BS + 1 : 2 * BS + 4] = b"abc"

    async def body(reader: ObjectReader, limiter: trio.CapacityLimiter) -> None:
        f = await StagedFile.open(str(tmp_path), "1", base_ref(store, "f"), reader, limiter)
        await f.pwrite(2 * BS + 1, b"abc")
        await f.materialize()
        assert f.base is None
        store.delete("f")  # the base may vanish once materialized
        assert await f.pread(0, len(base)) == bytes(expected)
        info = await f.upload(store, "f2")
        assert info.size == len(base)
        assert await f.pread(0, len(base)) == bytes(expected)
        await f.close()

    run_staged(store, str(tmp_path), body, memory_blocks=0)
    assert store.objects["f2"] == bytes(expected)


def test_base_errors_propagate(tmp_path: Path) -> None:
    store = FakeStore({"f": payload(2 * BS)})

    async def body(reader: ObjectReader, limiter: trio.CapacityLimiter) -> None:
        f = await StagedFile.open(str(tmp_path), "1", base_ref(store, "f"), reader, limiter)
        store.delete("f")
        with pytest.raises(NotFound):
            await f.pread(0, 10)
        with pytest.raises(NotFound):
            await f.pwrite(5, b"x")
        await f.close()

    run_staged(store, str(tmp_path), body, memory_blocks=0)


_ops = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 6 * BS), st.binary(min_size=1, max_size=2 * BS)),
    st.tuples(st.just("truncate"), st.integers(0, 6 * BS), st.just(b"")),
    st.tuples(st.just("read"), st.integers(0, 6 * BS), st.integers(0, 3 * BS)),
)


@settings(max_examples=60, deadline=None)
@given(base_size=st.integers(0, 4 * BS), ops=st.lists(_ops, max_size=12))
def test_matches_a_bytearray_model(base_size: int, ops: list[tuple[str, int, object]]) -> None:
    base = payload(base_size, seed=3)
    store = FakeStore({"f": base})
    model = bytearray(base)

    async def body(reader: ObjectReader, limiter: trio.CapacityLimiter) -> None:
        with tempfile.TemporaryDirectory() as staging:
            f = await StagedFile.open(staging, "x", base_ref(store, "f"), reader, limiter)
            for op, offset, arg in ops:
                if op == "write":
                    assert isinstance(arg, bytes)
                    await f.pwrite(offset, arg)
                    if offset > len(model):
                        model.extend(bytes(offset - len(model)))
                    model[offset : offset + len(arg)] = arg
                elif op == "truncate":
                    await f.truncate(offset)
                    del model[offset:]
                    model.extend(bytes(offset - len(model)))
                else:
                    assert isinstance(arg, int)
                    assert await f.pread(offset, arg) == bytes(model[offset : offset + arg])
                assert f.size == len(model)
            assert await f.pread(0, len(model) + 1) == bytes(model)
            await f.upload(store, "out")
            await f.close()

    run_staged(store, "/unused", body, memory_blocks=2)
    assert store.objects["out"] == bytes(model)


def test_a_new_files_first_write_is_made_with_it_and_charged(tmp_path: Path) -> None:
    """``first_write``: a new file's create and first write in one thread hop; the
    staging area is charged before, and given back if the create fails."""
    space = StagingSpace(limit=10_000, wait=0.0)
    blocker = tmp_path / "a-file"  # as the staging directory: the create fails
    blocker.write_bytes(b"")

    async def body(reader: ObjectReader, limiter: trio.CapacityLimiter) -> None:
        f = await StagedFile.open(
            str(tmp_path), "n", None, reader, limiter, new=True, space=space,
            first_write=(100, b"abc"),
        )  # fmt: skip
        assert f.dirty and f.size == 103 and space.used == 103
        assert await f.pread(0, 200) == bytes(100) + b"abc"
        assert await f.pwrite(103, b"d") == 1 and f.size == 104
        await f.close()
        assert space.used == 0
        with pytest.raises(NoSpace):  # past the bound: nothing made, nothing charged
            await StagedFile.open(
                str(tmp_path), "big", None, reader, limiter, new=True, space=space,
                first_write=(0, b"x" * 10_001),
            )  # fmt: skip
        with pytest.raises(FsError) as failed:  # the create fails: the charge goes back
            await StagedFile.open(
                str(blocker), "n", None, reader, limiter, new=True,
                space=space, first_write=(0, b"x"),
            )  # fmt: skip
        assert failed.value.errno in (errno.EEXIST, errno.ENOTDIR)
        assert space.used == 0

    run_staged(FakeStore(), str(tmp_path), body)
    assert not (tmp_path / "big").exists()


def test_staged_files_charge_the_staging_area_by_logical_size(tmp_path: Path) -> None:
    store = FakeStore()
    store.objects["base"] = payload(3000)
    space = StagingSpace(limit=10_000, wait=0.0)

    async def body(reader: ObjectReader, limiter: trio.CapacityLimiter) -> None:
        new = await StagedFile.open(
            str(tmp_path), "n", None, reader, limiter, new=True, space=space
        )
        await new.pwrite(0, b"x" * 6000)
        assert space.used == 6000
        cow = await StagedFile.open(
            str(tmp_path), "c", base_ref(store, "base"), reader, limiter, space=space
        )
        assert space.used == 9000  # the whole base: an upload materializes it
        with pytest.raises(NoSpace):
            await new.pwrite(6000, b"y" * 5000)
        await new.truncate(1000)
        assert space.used == 4000
        await cow.close()
        assert space.used == 1000
        path, fd = await new.detach()  # handed to the journal, which counts it from now on
        os.close(fd)
        paths.append(path)
        assert space.used == 0

    paths: list[str] = []
    run_staged(store, str(tmp_path), body)
    assert os.path.getsize(paths[0]) == 1000
