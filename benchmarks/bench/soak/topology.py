"""Every process of the soak, on 127.0.0.1: moto behind the fault proxy, a 3-member etcd,
a tree service over it, two cache workers in a group, and two FUSE mounts.

The test-support helpers start each one (``testkit``); this module only wires
them. The reader mount's cache directory is a small tmpfs of its own, so the soak can
fill that filesystem (the disk-full fault) without touching the machine's disk.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from cloudfs.mount.runtime import read_pid
from testkit.cache_workers import CacheWorker, running_cache_worker
from testkit.etcd import EtcdCluster, running_etcd
from testkit.faults_proxy import FaultsProxy, running_proxy
from testkit.mounts import Backing, Mount
from testkit.servers import S3Server, running_s3_server
from testkit.tree_server import TreeServer, running_tree_server

BUCKET = "soak"
GROUP = "soak"
HEARTBEAT = 0.5  # the workers' --heartbeat (seconds)
TMPFS_SIZE = "256m"  # the reader mount's cache filesystem
READER_CACHE_SIZE = "160M"  # its disk block cache: smaller than the data set


@dataclass
class Topology:
    s3: S3Server
    proxy: FaultsProxy
    etcd: EtcdCluster
    tree: TreeServer
    workers: list[CacheWorker]
    writer: Mount  # write-back; reads too
    reader: Mount  # reads only; its cache directory is the tmpfs at ``reader_cache_fs``
    reader_cache_fs: Path
    dataset: Mount  # --read-only --dataset-mode on: warm files served by the kernel

    @property
    def mounts(self) -> dict[str, Mount]:
        return {"writer": self.writer, "reader": self.reader, "dataset": self.dataset}

    def mount_pid(self, name: str) -> int | None:
        return read_pid(os.path.realpath(self.mounts[name].root))


def _tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
        check=True,
        capture_output=True,
        timeout=30,
    )


def _untmpfs(path: Path) -> None:
    with suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def _mount(
    stack: ExitStack, backing: Backing, base: Path, name: str, cache_dir: Path, opts: list[str]
) -> Mount:
    root = base / name
    root.mkdir(parents=True, exist_ok=True)
    m = Mount(root, backing, cache_dir, opts)
    m.start()
    stack.callback(m.stop)
    return m


@contextmanager
def running_topology(workdir: Path, log: Callable[[str], None] = print) -> Iterator[Topology]:
    """Start everything under ``workdir``; stop (and unmount) all of it on exit.

    The data set is written by the caller through ``Topology.s3.client()`` (straight
    to moto) before any reads; the mounts list the bucket through the tree service.
    """
    with ExitStack() as stack:
        s3 = stack.enter_context(running_s3_server())
        s3.client().create_bucket(Bucket=BUCKET)  # type: ignore[no-untyped-call]
        proxy = stack.enter_context(running_proxy(s3.endpoint, seed=7))
        env = s3.env()
        env["AWS_ENDPOINT_URL_S3"] = proxy.endpoint  # everything but the final check
        log(f"moto at {s3.endpoint}, fault proxy at {proxy.endpoint}")
        (workdir / "etcd").mkdir(parents=True, exist_ok=True)
        etcd = stack.enter_context(running_etcd(workdir / "etcd", members=3))
        hosts = ",".join(e.removeprefix("http://") for e in etcd.endpoints)
        tree = stack.enter_context(
            running_tree_server(
                f"etcd://{hosts}/soak", env=env, log_path=workdir / "tree-server.log"
            )
        )
        log(f"etcd {hosts}; tree service at {tree.address}")
        uri = tree.new_volume(f"s3://{BUCKET}")
        worker_opts = [
            "--s3-endpoint", proxy.endpoint, "--cache-size", "256M",
            "--memory-cache-size", "64M", "--group", GROUP,
            "--meta", f"grpc://{tree.address}", "--heartbeat", str(HEARTBEAT),
        ]  # fmt: skip
        workers = [
            stack.enter_context(running_cache_worker(env, options=worker_opts)) for _ in range(2)
        ]
        log(f"cache workers {[w.address for w in workers]} in group {GROUP!r}")
        # The mounts' environment names the proxy: the same server, seen through it.
        backing = Backing(uri=uri, s3=S3Server(proxy.endpoint, s3.proc), bucket=BUCKET)
        common = [
            "--s3-endpoint", proxy.endpoint, "--cache-group", GROUP,
            "--memory-cache-size", "64M",
        ]  # fmt: skip
        writer = _mount(
            stack, backing, workdir, "mnt-writer", workdir / "cache-writer",
            [*common, "--write-mode", "back", "--cache-size", "512M"],
        )  # fmt: skip
        cache_fs = workdir / "cache-reader"  # its log goes next to it, not on the tmpfs
        _tmpfs(cache_fs, TMPFS_SIZE)
        stack.callback(_untmpfs, cache_fs)
        reader = _mount(
            stack, backing, workdir, "mnt-reader", cache_fs,
            [*common, "--cache-size", READER_CACHE_SIZE],
        )  # fmt: skip
        dataset = _mount(
            stack, backing, workdir, "mnt-dataset", workdir / "cache-dataset",
            [*common, "--read-only", "--dataset-mode", "on", "--cache-size", "256M"],
        )  # fmt: skip
        log(
            f"mounts: writer {writer.root} (write-back), reader {reader.root} (cache on tmpfs),"
            f" dataset {dataset.root} (dataset mode)"
        )
        yield Topology(s3, proxy, etcd, tree, workers, writer, reader, cache_fs, dataset)
