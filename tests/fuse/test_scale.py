"""Large files across many 4 MiB blocks, concurrent readers, many files, big directories."""

from __future__ import annotations

import hashlib
import os
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from testkit.mounts import MntBacking

MiB = 1 << 20
BLOCK = 4 * MiB
# The bulk tests make a fifth of their files or directories on "tree": every
# create there is a namespace change serialized across two tree servers through
# etcd (about 20 a second on a 2-core machine, see RESULTS-mdtest.md), so 5,000
# would take minutes of CI. A fifth still spans many readdir pages (128 each).
TREE_SHARE = 5


def bulk(count: int, mnt_kind: str) -> int:
    return count // TREE_SHARE if mnt_kind == "tree" else count


def write_in_chunks(path: Path, data: bytes, chunk: int = MiB) -> None:
    fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view[:chunk])
            view = view[n:]
    finally:
        os.close(fd)


def run_threads(count: int, target: Callable[[int], None]) -> None:
    """Run target(i) in count threads; re-raise the first failure."""
    errors: list[BaseException] = []

    def wrapper(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=wrapper, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


@pytest.fixture(scope="module")
def big_data() -> bytes:
    return random.Random(20).randbytes(20 * MiB + 12345)


@pytest.mark.parametrize("size", [BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK])
def test_sizes_around_block_boundaries(mnt: Path, size: int) -> None:
    data = random.Random(size).randbytes(size)
    write_in_chunks(mnt / "f", data, chunk=3 * MiB + 7)
    assert os.stat(mnt / "f").st_size == size
    assert (mnt / "f").read_bytes() == data


@pytest.mark.slow
def test_large_file_sequential_and_random_reads(mnt: Path, big_data: bytes) -> None:
    path = mnt / "big"
    write_in_chunks(path, big_data)
    assert os.stat(path).st_size == len(big_data)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(MiB):
            h.update(chunk)
    assert h.hexdigest() == hashlib.sha256(big_data).hexdigest()
    rng = random.Random(7)
    fd = os.open(path, os.O_RDONLY)
    try:
        offsets = [b * BLOCK + d for b in range(1, 6) for d in (-3, 0, 3)]
        offsets += [rng.randrange(len(big_data)) for _ in range(200)]
        for off in offsets:
            n = rng.choice([1, 100, 4096, 65536, MiB + 17])
            assert os.pread(fd, n, off) == big_data[off : off + n], off
        assert os.pread(fd, 100, len(big_data) - 10) == big_data[-10:]
    finally:
        os.close(fd)


@pytest.mark.slow
def test_large_file_random_overwrites_across_blocks(mnt: Path, big_data: bytes) -> None:
    path = mnt / "big"
    write_in_chunks(path, big_data)
    model = bytearray(big_data)
    rng = random.Random(11)
    fd = os.open(path, os.O_RDWR)
    try:
        for _ in range(60):
            off = rng.randrange(len(model) + MiB)
            data = rng.randbytes(rng.choice([1, 4096, BLOCK + 5, 300_000]))
            os.pwrite(fd, data, off)
            if off + len(data) > len(model):
                model.extend(bytes(off + len(data) - len(model)))
            model[off : off + len(data)] = data
        # straddle every block boundary in one write
        data = rng.randbytes(3 * BLOCK)
        os.pwrite(fd, data, BLOCK - 100)
        model[BLOCK - 100 : BLOCK - 100 + len(data)] = data
        os.fsync(fd)
    finally:
        os.close(fd)
    assert os.stat(path).st_size == len(model)
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(model).digest()


@pytest.mark.slow
def test_concurrent_readers_of_one_file(mnt: Path, big_data: bytes) -> None:
    path = mnt / "shared"
    write_in_chunks(path, big_data)

    def reader(i: int) -> None:
        rng = random.Random(i)
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(60):
                off = rng.randrange(len(big_data))
                n = rng.choice([4096, 131072, MiB])
                assert os.pread(fd, n, off) == big_data[off : off + n]
        finally:
            os.close(fd)

    run_threads(8, reader)


@pytest.mark.slow
def test_concurrent_sequential_readers_share_one_file(mnt: Path, big_data: bytes) -> None:
    path = mnt / "shared"
    write_in_chunks(path, big_data)
    digest = hashlib.sha256(big_data).hexdigest()

    def reader(_: int) -> None:
        h = hashlib.sha256()
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(256 * 1024):
                h.update(chunk)
        assert h.hexdigest() == digest

    run_threads(6, reader)


@pytest.mark.slow
def test_concurrent_writers_to_separate_files(mnt: Path) -> None:
    def writer(i: int) -> None:
        data = random.Random(i).randbytes(2 * MiB + i)
        write_in_chunks(mnt / f"w{i}", data, chunk=128 * 1024)
        assert (mnt / f"w{i}").read_bytes() == data

    run_threads(8, writer)
    assert len(os.listdir(mnt)) == 8


@pytest.mark.slow
def test_concurrent_pwrites_to_disjoint_ranges_of_one_file(mnt: Path) -> None:
    path = mnt / "f"
    part = 512 * 1024
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:

        def writer(i: int) -> None:
            data = bytes([i + 1]) * part
            for off in range(0, part, 64 * 1024):
                os.pwrite(fd, data[off : off + 64 * 1024], i * part + off)

        run_threads(16, writer)
    finally:
        os.close(fd)
    content = path.read_bytes()
    assert len(content) == 16 * part
    for i in range(16):
        assert content[i * part : (i + 1) * part] == bytes([i + 1]) * part


def _small(i: int) -> bytes:
    return f"content of {i}\n".encode() * (i % 7 + 1)


@pytest.mark.slow
def test_5000_small_files(mnt: Path, mnt_kind: str) -> None:
    """5,000 files written by 8 threads (as a data-prep job would), then read back."""
    count = bulk(5000, mnt_kind)
    d = mnt / "small"
    d.mkdir()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: (d / f"file-{i:05d}.bin").write_bytes(_small(i)), range(count)))
    names = os.listdir(d)
    assert len(names) == count
    with ThreadPoolExecutor(8) as pool:
        contents = list(pool.map(lambda i: (d / f"file-{i:05d}.bin").read_bytes(), range(count)))
    assert all(contents[i] == _small(i) for i in range(count))


@pytest.mark.slow
def test_directory_of_10000_entries_lists_completely(
    mnt: Path, mnt_backing: MntBacking, mnt_kind: str
) -> None:
    """A UFS directory of 10,000 objects, listed through the mount in pages."""
    count = bulk(10_000, mnt_kind)
    expected = {f"entry_{i:05d}_{'p' * (i % 50)}" for i in range(count)}
    mnt_backing.put_many({f"huge/{name}": b"" for name in expected})
    d = mnt / "huge"
    mnt_backing.wait_until_visible(d)  # the mount lists mnt again after its TTL
    listed = os.listdir(d)
    assert len(listed) == count
    assert set(listed) == expected
    with os.scandir(d) as it:
        scanned = [(e.name, e.is_file(follow_symlinks=False)) for e in it]
    assert len(scanned) == count
    assert {n for n, _ in scanned} == expected
    assert all(is_file for _, is_file in scanned)


@pytest.mark.slow
def test_wide_and_deep_tree(mnt: Path, mnt_kind: str) -> None:
    expected: dict[Path, bytes] = {}
    for a in range(20):
        for b in range(bulk(20, mnt_kind)):
            d = mnt / f"a{a:02d}" / f"b{b:02d}"
            d.mkdir(parents=True)
            expected[d / "leaf"] = f"{a}/{b}".encode()
            (d / "leaf").write_bytes(expected[d / "leaf"])
    found = {Path(dirpath) / name for dirpath, _dirnames, files in os.walk(mnt) for name in files}
    assert found == set(expected)
    for path, content in expected.items():
        assert path.read_bytes() == content
