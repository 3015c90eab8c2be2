"""The tree-service API alone, no FUSE (issue 27): per-operation latency of a Python client.

``benchmarks/mdtest.py --api`` starts one tree server (``cloudfs meta serve``) over LMDB
(``api-lmdb``) or over a 3-member etcd on loopback (``api-etcd``), makes a volume, and
runs client *processes* (spawned: a fresh interpreter each, no forked gRPC state), each
with its own ``GrpcMeta`` and its own directories. In step with the others (a barrier
before and after each phase), each client times every call of:

    create_open   what a write-through mount (the default) does for a new empty file
                  (``cloudfs/vfs/core.py`` ``create``, ``tests/fuse/test_tree_calls.py``):
                  ``create_open`` (create, open and object key in one call), the
                  empty object put into the UFS (untimed: not a tree call), then
                  ``commit_upload`` at that key and ``release``
    create        plain ``create`` (mknod), on other names
    stat          ``getattr`` of each file made by create_open
    rename        each of those to a new name in the same directory
    unlink        each renamed file

The plain creates' files are unlinked afterwards, untimed. Per phase: ops/s (all
clients' calls over the slowest client's time), and the median and p99 of every
call's latency, in ms.
"""

from __future__ import annotations

import math
import multiprocessing
import queue
import stat
import statistics
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.types import ROOT_INODE, InodeId
from cloudfs.ufs.local import LocalObjectStore
from testkit.etcd import running_etcd
from testkit.tree_server import running_tree_server

API_PHASES = ("create_open", "create", "stat", "rename", "unlink")
API_LABELS = {
    "create_open": "create as a mount: create_open + commit_upload + release",
    "create": "create (plain)",
    "stat": "stat (getattr)",
    "rename": "rename (same directory)",
    "unlink": "unlink",
}
API_CONFIGS = ("api-lmdb", "api-etcd")
FILE = stat.S_IFREG | 0o644
DIR = stat.S_IFDIR | 0o755
CALL_TIMEOUT = 30.0  # every gRPC call's deadline
PHASE_TIMEOUT = 1800.0  # how long a client waits at a barrier for the others
Summary = dict[str, dict[str, float]]  # phase -> ops_s / p50_ms / p99_ms


@contextmanager
def etcd_engine(work: Path, prefix: str = "mdtest") -> Iterator[str]:
    """A 3-member etcd on loopback, data on local disk (as deployed); yields the engine URI."""
    (work / "etcd").mkdir(parents=True)
    with running_etcd(work / "etcd", members=3, in_memory=False) as etcd:
        hosts = ",".join(e.removeprefix("http://") for e in etcd.endpoints)
        yield f"etcd://{hosts}/{prefix}"


@contextmanager
def api_volume(config: str, work: Path) -> Iterator[tuple[str, str, Path]]:
    """One tree server of ``config`` (api-lmdb, api-etcd) with a fresh volume over a local
    directory; yields (server address, volume name, that directory)."""
    data = work / "ufs"
    data.mkdir(parents=True)
    with ExitStack() as stack:
        engine = None if config == "api-lmdb" else stack.enter_context(etcd_engine(work))
        server = stack.enter_context(running_tree_server(engine))
        uri = server.new_volume(f"file://{data}")
        yield server.address, uri.rsplit("/", 1)[1], data


@dataclass(frozen=True)
class ApiJob:
    address: str
    volume: str
    client: int
    ops: int
    ufs_root: str  # the volume's local directory: where the empty objects go
    dirs: int
    barrier: Any  # a multiprocessing Barrier shared by every client of the run


def api_client(job: ApiJob, results: Any) -> None:
    """One client process: puts (client, {phase: (wall s, [latency s])}, error text)."""
    try:
        results.put((job.client, _work(job), ""))
    except BaseException:  # reported to the parent, whatever it is
        job.barrier.abort()  # the others stop waiting for this one
        results.put((job.client, {}, traceback.format_exc()))


def _work(job: ApiJob) -> dict[str, tuple[float, list[float]]]:
    meta = GrpcMeta(job.address, job.volume, timeout=CALL_TIMEOUT, listing_timeout=CALL_TIMEOUT)
    try:
        meta.start_session()
        top = meta.mkdir(ROOT_INODE, f"p{job.client}".encode(), DIR, 0, 0).inode
        dirs = [meta.mkdir(top, f"d{i}".encode(), DIR, 0, 0).inode for i in range(job.dirs)]
        names = [(dirs[i % len(dirs)], f"f{i}".encode()) for i in range(job.ops)]
        plain = [(d, b"g" + n[1:]) for d, n in names]
        made: list[InodeId] = []
        out: dict[str, tuple[float, list[float]]] = {}

        store = LocalObjectStore(job.ufs_root)

        def create_open(d: InodeId, n: bytes) -> float:
            attr, key = meta.create_open(d, n, 0o644, 0, 0)
            untimed = time.perf_counter()
            etag = store.put_bytes(key, b"").etag  # the mount's upload of the empty file
            untimed = time.perf_counter() - untimed
            meta.commit_upload(attr.inode, 0, time.time_ns(), etag, key)
            meta.release(attr.inode)
            made.append(attr.inode)
            return untimed

        calls: dict[str, tuple[Callable[..., Any], list[tuple[Any, ...]]]] = {
            "create_open": (create_open, [(d, n) for d, n in names]),
            "create": (lambda d, n: meta.create(d, n, FILE, 0, 0), [(d, n) for d, n in plain]),
            "stat": (meta.getattr, []),  # the inodes, once create_open made them
            "rename": (lambda d, n: meta.rename(d, n, d, b"r" + n), [(d, n) for d, n in names]),
            "unlink": (meta.unlink, [(d, b"r" + n) for d, n in names]),
        }
        for phase in API_PHASES:
            fn, args = calls[phase]
            if phase == "stat":
                args = [(inode,) for inode in made]
            job.barrier.wait(PHASE_TIMEOUT)
            out[phase] = _timed(fn, args)
            job.barrier.wait(PHASE_TIMEOUT)
        for d, n in plain:
            meta.unlink(d, n)
        return out
    finally:
        meta.close()


def _timed(fn: Callable[..., Any], args: list[tuple[Any, ...]]) -> tuple[float, list[float]]:
    """(wall s, [latency s]) of ``fn`` over ``args``; a float that ``fn`` returns is
    seconds it spent on something other than tree calls, left out of both."""
    latencies = []
    untimed = 0.0
    started = time.perf_counter()
    for a in args:
        t = time.perf_counter()
        result = fn(*a)
        skip = result if isinstance(result, float) else 0.0
        untimed += skip
        latencies.append(time.perf_counter() - t - skip)
    return time.perf_counter() - started - untimed, latencies


def run_api(
    address: str, volume: str, ufs_root: Path, clients: int, ops: int, dirs: int
) -> Summary:
    """``clients`` processes of ``ops`` files each against one volume; the summary per phase."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(clients), ctx.Queue()
    procs = [
        ctx.Process(
            target=api_client,
            args=(ApiJob(address, volume, c, ops, str(ufs_root), dirs, barrier), results),
            daemon=True,
        )
        for c in range(clients)
    ]
    for p in procs:
        p.start()
    got: list[dict[str, tuple[float, list[float]]]] = []
    deadline = time.monotonic() + PHASE_TIMEOUT * len(API_PHASES)
    try:
        while len(got) < clients:
            try:
                client, out, error = results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"{clients - len(got)} API client(s) did not finish") from None
            if error:
                raise RuntimeError(f"API client {client} failed:\n{error}")
            got.append(out)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    return summarize(got, clients * ops)


def summarize(got: list[dict[str, tuple[float, list[float]]]], ops: int) -> Summary:
    """Ops/s (``ops`` calls over the slowest client's time), median and p99 latency (ms)."""
    summary: Summary = {}
    for phase in API_PHASES:
        latencies = sorted(lat for out in got for lat in out[phase][1])
        wall = max(out[phase][0] for out in got)
        summary[phase] = {
            "ops_s": ops / wall if wall > 0 else 0.0,
            "p50_ms": 1000 * statistics.median(latencies),
            "p99_ms": 1000 * percentile(latencies, 0.99),
        }
    return summary


def percentile(ordered: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of an ascending list."""
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered))))
    return ordered[rank - 1]
