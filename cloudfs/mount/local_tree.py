"""An embedded mount's tree, also served to this node's processes: ``cloudfs:///MOUNTPOINT``.

``open_local_tree`` builds the mount's ``EmbeddedMeta`` (LMDB in the cache
directory, revalidating listings) over a ``WatchedKV`` whose feed is a ``MountFeed``, and ``serve``
binds the tree service (``TreeServer`` over ``SingleVolume``) on
``paths.tree_socket(mountpoint)``, mode 0600: only the mount's user (and
root) connects. ``cloudfs.client.local`` finds it through the control op
``describe`` (``cloudfs.control.describe_ops``).

The mount's ``Invalidator`` follows ``LocalTree.changes()``: what a UFS
listing changed (as before), and what a client of the socket committed, so
the kernel forgets those names and attributes at once, as a ``grpc://`` mount
forgets another mount's commits. Only a change made behind the mount's back
in the UFS itself waits for ``--meta-ttl``.

A ``grpc://`` mount serves nothing here: its tree is the tree service's, and
``describe`` sends clients there.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from cloudfs.config import MountConfig
from cloudfs.meta import change_queue
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine.kv_lmdb import LmdbKV
from cloudfs.meta.interface import Invalidation
from cloudfs.meta.service.changes import WatchedKV, current_session
from cloudfs.meta.service.limits import ServerLimits
from cloudfs.meta.service.server import TreeServer
from cloudfs.meta.service.single import LOCAL_VOLUME, MountFeed, RefuseChanges, SingleVolume
from cloudfs.meta.wire.volumes import VolumeSpec
from cloudfs.ufs.interface import ObjectStore

log = logging.getLogger(__name__)

SERVER_THREADS = 16  # calls at once through the socket (a few local jobs, their workers)


class LocalTree:
    """The mount's tree (``meta``), the changes its kernel must drop (``changes()``), and
    the socket serving the tree (``serve``, ``close``)."""

    def __init__(self, meta: EmbeddedMeta, queue: change_queue.ChangeQueue, feed: MountFeed):
        self.meta = meta
        self._queue = queue
        self._feed = feed
        self._server: TreeServer | None = None
        self._path: Path | None = None

    def changes(self) -> Iterator[Invalidation]:
        """A ``ChangeSource``: UFS listings' changes and the socket's commits; ends at ``close``."""
        return self._queue.changes()

    def serve(self, path: Path, spec: VolumeSpec, *, read_only: bool) -> None:
        """Serve the tree as volume ``spec.name`` on ``unix:path`` (replacing a stale file).

        Called once the kernel mounted: a failure here costs ``cloudfs:///`` only, so it
        is logged rather than raised (the mount serves on).
        """
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
            old_umask = os.umask(0o177)  # the socket is created 0600, never wider
            try:
                server = TreeServer(
                    SingleVolume(self.meta, self._feed, spec),
                    f"unix:{path}",
                    threads=SERVER_THREADS,
                    interceptors=(RefuseChanges(),) if read_only else (),
                    # one user's own processes, all one peer: no per-client share
                    limits=ServerLimits(max_calls_per_client=0, max_streams_per_client=0),
                )
            finally:
                os.umask(old_umask)
            path.chmod(0o600)
            server.start()
        except (OSError, RuntimeError) as e:  # grpc says RuntimeError when it cannot bind
            log.warning("cannot serve the tree on %s (cloudfs:/// will fail): %s", path, e)
            return
        self._server, self._path = server, path
        log.info("tree served to local processes on %s", path)

    def close(self) -> None:
        """Stop serving, remove the socket, end ``changes()``; the caller closes ``meta``."""
        if self._server is not None:
            self._server.stop(grace=1.0)
            self._server = None
        if self._path is not None:
            with contextlib.suppress(OSError):
                self._path.unlink(missing_ok=True)
        self._queue.close()


def open_local_tree(lmdb_dir: str, store: ObjectStore, config: MountConfig) -> LocalTree:
    """The mount's tree: an LMDB environment in ``lmdb_dir`` mirroring ``store``."""
    queue = change_queue.ChangeQueue()
    feed = MountFeed(queue.put)

    def listing_changed(change: Invalidation) -> None:
        # A listing taken for a socket call is that call's commit: MountFeed sent it.
        if not current_session():
            queue.put(change)

    meta = EmbeddedMeta.with_defaults(
        WatchedKV(LmdbKV(lmdb_dir), feed),
        store,
        config,
        revalidate=True,
        on_listing_change=listing_changed,
    )
    return LocalTree(meta, queue, feed)


def local_volume(config: MountConfig, ufs_uri: str) -> VolumeSpec:
    """How the socket describes the mount's tree (``GetVolume``)."""
    return VolumeSpec(
        name=LOCAL_VOLUME,
        ufs_uri=ufs_uri,
        meta_ttl=config.meta_ttl,
        default_uid=config.default_uid,
        default_gid=config.default_gid,
        file_mode=config.file_mode,
        dir_mode=config.dir_mode,
    )
