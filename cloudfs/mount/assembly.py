"""The composition root of a mount: build every layer from a MountConfig and wire them."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial

import trio

from cloudfs.cache.admission import make_admission
from cloudfs.cache.disk import DiskBlockCache
from cloudfs.cache.interface import BlockTier
from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.config import MountConfig, WriteConfig
from cloudfs.control import paths
from cloudfs.control.cache_ops import CacheControl
from cloudfs.control.describe_ops import DescribeControl, describe_mount
from cloudfs.control.refresh_ops import RefreshControl
from cloudfs.control.server import ControlServer
from cloudfs.control.writeback_ops import WritebackControl
from cloudfs.data.journal import WriteJournal
from cloudfs.data.ledger import PrefetchLedger
from cloudfs.data.reader import ObjectReader
from cloudfs.data.uploader import Backlog, Uploader, UploadPolicy
from cloudfs.epoch.board import JobBoard, Window
from cloudfs.epoch.hint_ops import HintControl
from cloudfs.errors import FsError, StartupError
from cloudfs.fuse import session
from cloudfs.fuse.invalidator import Invalidator
from cloudfs.fuse.operations import CloudFsOperations
from cloudfs.lib.endpoints import serve_metrics
from cloudfs.meta.client.cache_reports import CacheReportClient
from cloudfs.meta.client.change_log import ChangeLog
from cloudfs.meta.client.detached import DetachedReads
from cloudfs.meta.client.detached_writes import DetachedWrites
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.client.tree_uri import TreeUri, is_tree_uri, parse_tree_uri
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.meta.interface import ChangeSource, Meta
from cloudfs.metrics import Metrics
from cloudfs.mount import checks, runtime
from cloudfs.mount.cache_group import mount_group
from cloudfs.mount.cache_report import CacheReporter, held_bytes, node_name, report_interval
from cloudfs.mount.local_blocks import local_blocks
from cloudfs.mount.local_tree import LocalTree, local_volume, open_local_tree
from cloudfs.mount.malloc import bound_malloc
from cloudfs.sizes import format_size
from cloudfs.ufs.factory import open_store
from cloudfs.ufs.metered import MeteredObjectStore
from cloudfs.vfs.core import Vfs

log = logging.getLogger(__name__)

TREE_CHANGES_LOG = "tree-changes.log"  # under the staging root, beside the write-back journal

# At unmount, how long blocks fetched but not yet written to the disk tier may take.
DISK_DRAIN_SECONDS = 10.0


def mount_filesystem(config: MountConfig) -> Callable[[], int]:
    """Mount ``config`` and return the function that serves it until unmounted.

    Everything that can fail for a user's reason (bucket, credentials, cache
    directory, the mount itself) fails here, before the caller detaches. What
    was opened is closed on one ``ExitStack``, in reverse: at once if the
    assembly fails, else when the returned function ends.
    """
    bound_malloc()  # before any worker thread exists
    with ExitStack() as stack:
        serve = _assemble(config, stack)
        teardown = stack.pop_all()  # from here, the returned function owns it

    def serve_then_close() -> int:
        try:
            with teardown:
                return serve()
        finally:
            log.info("unmounted %s", config.mountpoint)

    return serve_then_close


def _assemble(config: MountConfig, stack: ExitStack) -> Callable[[], int]:
    """Build every layer, pushing each one's close onto ``stack`` as it is made: what is
    made later is closed first (the change stream before the tree session it reads, the
    cache group before the tree session it is listed in, the tree before the cache locks)."""
    cache_dir = config.cache.cache_dir
    staging_root = config.write.staging_dir or cache_dir
    held = {cache_dir, *config.cache.disk_dirs, staging_root}  # one mount each
    for directory in sorted(held):
        stack.enter_context(checks.lock_cache_dir(directory))
    metrics = Metrics()
    meta: Meta
    local: LocalTree | None = None  # an embedded tree, served to local processes too
    if is_tree_uri(config.ufs_uri):  # the tree lives in the tree service; the data in its UFS
        tree = parse_tree_uri(config.ufs_uri)
        data_uri = _volume_ufs(tree, config)
        store = MeteredObjectStore(open_store(data_uri, config.s3), metrics)
        store.check()
        meta = _tree_session(tree, config, stack, metrics, staging_root)
    else:
        data_uri = config.ufs_uri
        store = MeteredObjectStore(open_store(config.ufs_uri, config.s3), metrics)
        store.check()
        local = open_local_tree(os.path.join(cache_dir, "meta"), store, config)
        meta = local.meta
        stack.callback(meta.close)
    if config.metrics_address:
        serve_metrics(config.metrics_address, metrics)
    ledger = PrefetchLedger(metrics)
    memory = MemoryBlockCache(config.cache.memory_bytes, metrics, on_drop=ledger.dropped)
    disk = _disk_tier(config, metrics)
    group = mount_group(config, data_uri, store, (memory, disk), metrics)
    stack.callback(group.close)  # leaves the group before the tree session ends
    starts: list[Callable[[], None]] = [group.start]
    if isinstance(meta, DetachedReads | DetachedWrites):  # what this node caches, for the tree
        reporter = _cache_reporter(config, meta.session, (memory, disk))
        stack.callback(reporter.close)
        starts.append(reporter.start)
    blocks_socket = local_blocks(config, data_uri, store, (memory, disk), metrics)
    if blocks_socket is not None:
        stack.callback(blocks_socket.stop)  # removes the socket: local processes read the store
        starts.append(blocks_socket.start)
    reader = ObjectReader(
        store, memory, disk, config.cache, metrics, config.store_id,
        trio.CapacityLimiter(32), ledger=ledger, peers=group.peers,
    )  # fmt: skip
    board = JobBoard(
        meta, reader, disk, metrics, _order_window(config),
        series_grace=config.cache.job_series_grace,
    )  # fmt: skip
    reader.watch = board
    staging = os.path.join(staging_root, "staging")
    os.makedirs(staging, exist_ok=True)
    journal = WriteJournal(os.path.join(staging_root, "writeback"))
    owed = journal.recover()
    if owed:
        log.info("write-back journal: %d closed files still to upload", len(owed))
    vfs = Vfs(meta, store, reader, staging, read_only=config.read_only)
    uploader = Uploader(
        journal,
        store,
        vfs.files.committer,
        metrics,
        _upload_policy(config.write),
        trio.CapacityLimiter(16),
    )
    vfs.files.attach_uploader(uploader, write_back=config.write.mode == "back")
    vfs.files.space.limit = config.write.staging_bytes
    vfs.files.space.wait = config.write.staging_wait
    writeback = WritebackControl(uploader, config.write.drain_timeout)
    dataset_mode, open_path = _dataset_mode(config)
    log.info("opens: %s", open_path)
    ops = CloudFsOperations(
        vfs,
        metrics,
        timeout=config.meta_ttl,
        block_size=config.cache.block_size,
        # a tree service pushes new names (Invalidator); a local tree answers at once
        negative_timeout=0.0 if meta.local_reads else config.meta_ttl,
        dataset_mode=dataset_mode,
        cache_listings=dataset_mode and session.caches_listings(),
        noflush_reads=session.opens_without_flush(),
    )
    options = session.mount_options(
        config.ufs_uri,
        read_only=config.read_only,
        allow_other=config.allow_other,
        debug=config.debug,
    )
    session.start(ops, config.mountpoint, options)
    metrics.fuse_receiver_view = session.receiver_counts()
    with ExitStack() as mounted:  # a failure from here on unmounts again
        mounted.callback(session.stop, unmount=True)
        pid_path = runtime.write_pid(config.mountpoint)
        stack.callback(pid_path.unlink, missing_ok=True)
        # The tree tells this mount what changed behind its back: other mounts' commits
        # (close-to-open), and what a re-listing of the UFS found; so does cloudfs refresh.
        changes: ChangeSource = local or meta  # local: also what the tree socket's clients commit
        invalidator = Invalidator(changes, metrics, vfs.forget_version)
        tree_socket = paths.tree_socket(config.mountpoint)
        if local is not None:
            local.serve(tree_socket, local_volume(config, data_uri), read_only=config.read_only)
            stack.callback(local.close)  # no more calls through the socket; the file goes
        stack.callback(invalidator.stop)  # first: before meta.close(), which ends its stream
        starts.insert(0, invalidator.start)
        control = ControlServer(
            paths.control_socket(config.mountpoint),
            {
                **CacheControl(meta, reader, metrics, _facts(config, open_path)).handlers(),
                **RefreshControl(meta, invalidator.apply).handlers(),
                **writeback.handlers(),
                **DescribeControl(describe_mount(config, data_uri, str(tree_socket))).handlers(),
            },
        )
        control_socket = control.bind()
        hint_ops = HintControl(meta, reader, board)
        hints = ControlServer(
            paths.hints_socket(config.mountpoint),
            hint_ops.handlers(),
            stream_handlers=hint_ops.stream_handlers(),
            shared=True,
        )
        hints_socket = hints.bind()
        mounted.pop_all()  # mounted: from here the serving function unmounts
    log.info("mounted %s on %s (cache %s)", config.ufs_uri, config.mountpoint, cache_dir)

    async def start_background(nursery: trio.Nursery) -> None:
        reader.start(nursery)
        nursery.start_soon(session.raise_read_ahead, config.mountpoint)
        nursery.start_soon(control.serve, control_socket)
        nursery.start_soon(hints.serve, hints_socket)
        board.start(nursery)
        for entry in owed:
            uploader.submit(entry, recovered=True)
        nursery.start_soon(uploader.run)
        if isinstance(meta, DetachedWrites):  # commits refused while changes waited
            token = trio.lowlevel.current_trio_token()
            meta.on_replayed.append(partial(_soon, token, uploader.retry_now))

    undrained: list[Backlog] = []

    async def before_stop() -> None:
        """After the last kernel request: fetched blocks onto disk, then the write-back drain."""
        board.stop()
        with trio.move_on_after(DISK_DRAIN_SECONDS):
            await reader.drain_disk_writes()
        if left := await writeback.drain_before_exit():
            undrained.append(left)

    def serve() -> int:
        """Serves until unmounted or signalled: 0, or 1 when the write-back drain ran out
        of time with files still owed (a pod's end must not pass for a clean one)."""
        for start in starts:
            start()
        signalled = trio.run(session.serve, start_background, before_stop)
        session.stop(unmount=signalled)
        for left in undrained:
            log.error(
                "%d closed file(s) (%s) not uploaded within --drain-timeout %gs; they stay "
                "in the write-back journal under %s, uploaded by the next mount that uses it "
                "(lost if that directory is, as a pod's emptyDir is)",
                left.files, format_size(left.bytes), config.write.drain_timeout, staging_root,
            )  # fmt: skip
            return 1
        return 0

    return serve


def _soon(token: trio.lowlevel.TrioToken, call: Callable[[], None]) -> None:
    """``call`` on the trio loop, from another thread; nothing once the loop has ended."""
    with contextlib.suppress(trio.RunFinishedError):
        token.run_sync_soon(call)


def _tree_session(
    tree: TreeUri, config: MountConfig, stack: ExitStack, metrics: Metrics, staging_root: str
) -> DetachedReads | DetachedWrites:
    """A session with the tree service for ``tree``'s volume, ended by ``stack``; its reads
    outlive an outage of the service (``detached.py``, the ``tree_detached`` gauge), and in
    write-back so do its changes (``detached_writes.py``: journaled under ``staging_root``,
    replayed when the service is back)."""
    grpc = GrpcMeta(tree.address, tree.volume, token=config.tree_token, tls=config.tls)
    reads = DetachedReads(grpc)
    metrics.tree_detached.set_function(
        lambda: time.time() - since if (since := reads.detached_since) else 0.0
    )
    meta: DetachedReads | DetachedWrites = reads
    if config.write.mode == "back" and not config.read_only:
        journal = ChangeLog(os.path.join(staging_root, TREE_CHANGES_LOG))
        meta = writes = DetachedWrites(reads, grpc, journal)
        metrics.tree_journaled.set_function(lambda: writes.journaled)
        metrics.tree_conflicts.set_function(lambda: writes.conflicts)
    stack.callback(meta.close)
    try:
        meta.start_session()
    except FsError as e:
        raise StartupError(f"cannot mount {tree.normalized}: {e}") from None
    return meta


def _cache_reporter(
    config: MountConfig, session: str, tiers: tuple[BlockTier, BlockTier]
) -> CacheReporter:
    """Report this mount's cached bytes for the scheduler extender (``cache_report.py``)."""
    tree = parse_tree_uri(config.ufs_uri)
    client = CacheReportClient(tree.address, token=config.tree_token, tls=config.tls)
    return CacheReporter(
        client, tree.volume, session, lambda: held_bytes(*tiers),
        node=node_name(), interval=report_interval(),
    )  # fmt: skip


def _dataset_mode(config: MountConfig) -> tuple[bool, str]:
    """Whether the kernel may skip open/flush/release, and a line saying why (for the
    log and ``cloudfs stats``)."""
    if config.dataset_mode == "off":
        return False, "through the mount (--dataset-mode off)"
    if not config.read_only:
        return False, "through the mount (read-write)"
    if not session.reads_without_open():
        why = (
            "through the mount: dataset mode needs the patched pyfuse3 "
            "(bash deploy/pyfuse3/install.sh)"
        )
        if config.dataset_mode == "on":
            raise StartupError(f"--dataset-mode on: {why}")
        log.warning("opens go %s; warm reads are slower", why)
        return False, why
    return True, "by the kernel (dataset mode)"


def _order_window(config: MountConfig) -> Window:
    cache = config.cache
    return Window(
        files=cache.order_window_files,
        bytes=cache.order_window_bytes or max(cache.memory_bytes // 2, cache.block_size),
        parallel=cache.order_parallel,
    )


def _facts(config: MountConfig, open_path: str) -> dict[str, object]:
    """What ``cloudfs stats`` shows about the mount besides its metrics."""
    return {
        "opens": open_path,
        "mountpoint": config.mountpoint,
        "ufs": config.ufs_uri,
        "pid": os.getpid(),
        "block_size": config.cache.block_size,
        "memory_bytes": config.cache.memory_bytes,
        "disk_bytes": config.cache.disk_bytes,
        "cache_policy": config.cache.policy,
        "write_mode": config.write.mode,
    }


def _volume_ufs(tree: TreeUri, config: MountConfig) -> str:
    """The UFS URI of a tree-service volume (this mount reads and writes its objects)."""
    client = VolumeClient(tree.address, token=config.tree_token, tls=config.tls)
    try:
        return client.get(tree.volume).ufs_uri
    except FsError as e:
        raise StartupError(f"cannot mount volume {tree.volume} of {tree.address}: {e}") from None
    finally:
        client.close()


def _upload_policy(write: WriteConfig) -> UploadPolicy:
    return UploadPolicy(
        concurrency=write.upload_concurrency,
        delay=write.upload_delay,
        deadline=write.upload_deadline,
    )


def _disk_tier(config: MountConfig, metrics: Metrics) -> DiskBlockCache:
    cache = config.cache
    directories = cache.disk_dirs or (os.path.join(cache.cache_dir, "blocks"),)
    return DiskBlockCache(
        directories,
        cache.disk_bytes,
        metrics,
        admission=make_admission(cache.policy, cache.disk_bytes // cache.block_size),
        min_free_ratio=cache.free_space_ratio,
    )
