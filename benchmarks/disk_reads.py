"""Reads served by the disk tier: what a kernel request costs once the page cache dropped it.

Writes N objects of 64 MiB through ``ObjectReader`` into a disk tier (an in-memory
store as the origin), then, with a fresh memory tier (the blocks are no longer in
memory, as after eviction or a remount's first minutes), reads every object start
to end with ``--request`` byte requests and a read-ahead cursor, ``--readers`` at
once, and reports MiB/s and how many bytes the disk tier read. The block files stay
in the kernel's page cache (no drop_caches: that needs root and measures the SSD).

    python3 benchmarks/disk_reads.py --repeats 3
    CLOUDFS_SRC=/tmp/old python3 benchmarks/disk_reads.py --repeats 3  # another checkout

(``git archive COMMIT cloudfs | tar -x -C /tmp/old`` gives an older read path to compare.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [os.environ.get("CLOUDFS_SRC", str(REPO_ROOT)), str(REPO_ROOT)]

import trio  # noqa: E402

from cloudfs.cache.disk import DiskBlockCache  # noqa: E402
from cloudfs.cache.memory import MemoryBlockCache  # noqa: E402
from cloudfs.config import CacheConfig  # noqa: E402
from cloudfs.data.blocks import ObjectRef  # noqa: E402
from cloudfs.data.prefetch import ReadCursor  # noqa: E402
from cloudfs.data.reader import ObjectReader  # noqa: E402
from cloudfs.metrics import Metrics  # noqa: E402
from testkit.memory_store import MemoryObjectStore  # noqa: E402

MiB = 1 << 20
OBJECT = 64 * MiB


def run_pass(
    store: MemoryObjectStore, disk: DiskBlockCache, refs: list[ObjectRef], request: int
) -> tuple[float, float]:
    """MiB/s of reading ``refs`` concurrently, and the disk tier's hit bytes meanwhile."""
    metrics = Metrics()
    config = CacheConfig(cache_dir="/nonexistent", memory_bytes=64 * MiB, readahead_blocks=8)
    memory = MemoryBlockCache(config.memory_bytes, metrics)
    before = disk.stats().hit_bytes

    async def main() -> float:
        async with ObjectReader.running(
            store, memory, disk, config, metrics, "bench", trio.CapacityLimiter(32)
        ) as reader:

            async def read_one(ref: ObjectRef) -> None:
                cursor = ReadCursor()
                for offset in range(0, ref.size, request):
                    data = await reader.read(ref, offset, request, cursor)
                    assert len(data) == min(request, ref.size - offset)

            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for ref in refs:
                    nursery.start_soon(read_one, ref)
            return sum(r.size for r in refs) / MiB / (time.perf_counter() - start)

    rate = trio.run(main)
    return rate, (disk.stats().hit_bytes - before) / MiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--readers", type=int, default=4)
    args = parser.parse_args()
    store = MemoryObjectStore()
    refs = []
    for i in range(args.readers):
        info = store.put_bytes(f"large/{i}", os.urandom(OBJECT))
        refs.append(ObjectRef(info.key, info.etag, OBJECT))
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/var/tmp")) as tmp:
        disk = DiskBlockCache([tmp], 4 * OBJECT * args.readers, Metrics())
        run_pass(store, disk, refs, MiB)  # fills the disk tier
        for readers in (1, args.readers):
            for request in (128 * 1024, MiB):
                runs = [run_pass(store, disk, refs[:readers], request) for _ in range(args.repeats)]
                rates = [r for r, _ in runs]
                shown = ", ".join(f"{r:.0f}" for r in rates)
                print(
                    f"{readers} reader(s), {request // 1024:>4} KiB requests: median "
                    f"{statistics.median(rates):6.0f} MiB/s ({shown}); disk tier read "
                    f"{runs[-1][1]:.0f} MiB for {readers * OBJECT // MiB} MiB"
                )


if __name__ == "__main__":
    main()
