"""A mount serving its blocks to the other processes of its user on the node.

``cloudfs://`` through fsspec (``cloudfs.client``) keys blocks as a ``grpc://``
mount of the volume does; when such a mount runs on the node, reading through
it makes the mount's memory and disk tiers the one cache of every process
(each DataLoader worker, each job), instead of one in-process cache each and
one object-store GET per process for the same block.

The mount serves them with what serves its cache to a group (one wire,
``cloudfs.peers``): a ``CacheServer`` over a ``BlockWorker`` on its own tiers
and store (``SingleStore``), listening on a UNIX socket in the runtime
directory (``paths.local_blocks_socket``: named by the volume's block-key salt
and the mountpoint), mode 0600 and without a token, and only for the mount's
own block size. A mount killed without unmounting leaves the file behind:
connecting to it is refused, and callers skip it.

Every mount serves it unless ``--no-local-blocks``: a ``grpc://`` mount to
``cloudfs://VOLUME`` clients (found by the salt), any mount to
``cloudfs:///MOUNTPOINT`` clients (found by the mountpoint). Failing to listen
is logged, never fatal: the socket makes other processes faster, the mount
works without it.
"""

from __future__ import annotations

import logging

from cloudfs.cache.interface import BlockTier
from cloudfs.config import MountConfig
from cloudfs.control import paths
from cloudfs.metrics import Metrics
from cloudfs.peers.server import CacheServer
from cloudfs.peers.stores import SingleStore
from cloudfs.peers.worker import BlockWorker
from cloudfs.ufs.interface import ObjectStore

log = logging.getLogger(__name__)

SERVE_THREADS = 16  # blocks served at once to the node's processes


def local_blocks(
    config: MountConfig,
    data_uri: str,
    store: ObjectStore,
    tiers: tuple[BlockTier, BlockTier],
    metrics: Metrics,
) -> CacheServer | None:
    """The server of this mount's blocks on its UNIX socket, not started yet (None
    where it is off or cannot listen); ``start`` it once mounted, ``stop`` it at
    unmount (which removes the socket file)."""
    if not config.local_blocks:
        return None
    path = paths.local_blocks_socket(config.store_id, config.mountpoint)
    memory, disk = tiers
    worker = BlockWorker(SingleStore(data_uri, store, config.store_id), memory, disk, metrics)
    try:
        server = CacheServer(
            worker, str(path), metrics, threads=SERVE_THREADS, block_size=config.cache.block_size
        )
    except OSError as e:
        log.warning("cannot serve this mount's blocks to local processes on %s: %s", path, e)
        return None
    log.info("serving this mount's blocks to local processes on %s", path)
    return server
