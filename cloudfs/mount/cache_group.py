"""A mount's part in a cache group: whom it asks, and what it serves.

* ``--cache-peers``: a static ``PeerGroup``.
* ``--cache-group NAME`` (grpc:// mounts): a ``PeerGroup`` whose members the
  tree service lists (``GroupWatcher``: at start, then every few seconds).
  If the first listing fails the mount starts with an empty group (every
  block from the UFS) rather than not at all: the group makes reads faster,
  never possible.
* ``--cache-group-serve HOST:PORT``: a ``CacheServer`` over a ``BlockWorker``
  built on the mount's own memory and disk tiers and its own store
  (``SingleStore``: that store only), with the group's token; with
  ``--cache-group`` it also joins the group as HOST:PORT (``GroupHeartbeat``),
  and its ``PeerGroup`` never asks itself.

The tiers are safe to share with the HTTP server's threads: ``MemoryBlockCache`` does
everything under one lock, and ``DiskBlockCache`` guards its index with one
and does file I/O outside it (both say so). The worker's single flight is
its own, so a block the mount and a peer miss at the same moment may be
fetched twice; a block the mount already holds is never fetched for a peer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from cloudfs.cache.interface import BlockTier
from cloudfs.config import MountConfig
from cloudfs.errors import FsError, StartupError
from cloudfs.lib.endpoints import check_can_listen, parse_host_port
from cloudfs.meta.client.groups import GroupClient
from cloudfs.meta.client.tree_uri import parse_tree_uri
from cloudfs.metrics import Metrics
from cloudfs.peers.client import PeerGroup
from cloudfs.peers.membership import GroupHeartbeat, GroupWatcher
from cloudfs.peers.server import CacheServer
from cloudfs.peers.stores import SingleStore
from cloudfs.peers.worker import BlockWorker
from cloudfs.ufs.interface import ObjectStore

log = logging.getLogger(__name__)

SERVE_THREADS = 16  # block GETs a mount serves at once


@dataclass
class MountGroup:
    """What ``mount_group`` built; ``start`` once mounted, ``close`` at unmount."""

    peers: PeerGroup | None = None
    client: GroupClient | None = None
    watcher: GroupWatcher | None = None
    server: CacheServer | None = None
    heartbeat: GroupHeartbeat | None = None
    started: bool = field(default=False)

    def start(self) -> None:
        if self.server is not None:
            self.server.start()
        if self.heartbeat is not None:
            self.heartbeat.start()
        if self.watcher is not None:
            self.watcher.start()
        self.started = True

    def close(self) -> None:
        """Leave the group first (peers stop asking), then stop serving and asking."""
        if self.started and self.heartbeat is not None:
            self.heartbeat.stop()
        if self.started and self.watcher is not None:
            self.watcher.stop()
        if self.server is not None:
            self.server.stop()
        if self.peers is not None:
            self.peers.close()
        if self.client is not None:
            self.client.close()


def mount_group(
    config: MountConfig,
    data_uri: str,
    store: ObjectStore,
    tiers: tuple[BlockTier, BlockTier],
    metrics: Metrics,
) -> MountGroup:
    """The cache group of ``config`` for blocks of the store at ``data_uri``;
    ``tiers``: the mount's memory and disk tiers (served with ``--cache-group-serve``)."""
    cache = config.cache
    serve = cache.group_serve
    built = MountGroup()
    try:
        if cache.peers:
            log.info("cache group: %s", ", ".join(cache.peers))
            built.peers = PeerGroup(
                cache.peers, data_uri, metrics, token=config.peer_token, self_address=serve,
                tls=config.tls,
            )  # fmt: skip
        elif cache.group:
            built.client = GroupClient(
                parse_tree_uri(config.ufs_uri).address, token=config.tree_token, tls=config.tls
            )
            built.peers = PeerGroup(
                _first_listing(built.client, cache.group), data_uri, metrics,
                token=config.peer_token, self_address=serve, tls=config.tls,
            )  # fmt: skip
            log.info("cache group %s: %s", cache.group, ", ".join(built.peers.members) or "empty")
            built.watcher = GroupWatcher(
                built.client,
                cache.group,
                built.peers.update,
                on_result=lambda ok: metrics.peer_group_lookups.labels(
                    "ok" if ok else "error"
                ).inc(),
            )
        if serve is not None:
            built.server = _server(config, serve, data_uri, store, tiers, metrics)
            if built.client is not None and cache.group:
                built.heartbeat = GroupHeartbeat(built.client, cache.group, serve)
    except BaseException:
        built.close()
        raise
    return built


def _first_listing(client: GroupClient, group: str) -> tuple[str, ...]:
    try:
        return client.members(group)
    except FsError as e:
        log.warning("cache group %s: cannot list its members yet (%s); reading the UFS", group, e)
        return ()


def _server(
    config: MountConfig,
    address: str,
    data_uri: str,
    store: ObjectStore,
    tiers: tuple[BlockTier, BlockTier],
    metrics: Metrics,
) -> CacheServer:
    check_can_listen(*parse_host_port(address, "--cache-group-serve"))
    memory, disk = tiers
    worker = BlockWorker(SingleStore(data_uri, store, config.store_id), memory, disk, metrics)
    try:
        server = CacheServer(
            worker, address, metrics, token=config.peer_token, threads=SERVE_THREADS,
            tls=config.group_serve_tls,
        )  # fmt: skip
    except (OSError, RuntimeError, ValueError) as e:
        raise StartupError(f"--cache-group-serve: cannot listen on {address}: {e}") from None
    log.info("serving this mount's cache to the group on %s", address)
    return server
