"""A mount's cache report to the tree service (CacheReportService of meta.proto).

* ``CacheReportClient`` (``meta/client/cache_reports.py``) carries the reports.
* ``CacheReporter``: a grpc:// mount reports every ``interval`` seconds (30 by
  default; ``CLOUDFS_CACHE_REPORT_SECONDS``) the bytes its caches hold, with
  its node name (``CLOUDFS_NODE_NAME``, which the CSI node plugin sets from
  the pod's ``spec.nodeName``; else the host name) and a TTL of three
  intervals, so one lost report does not drop the node.

What "the bytes its caches hold" means: the disk tier's payload bytes, or the
memory tier's where the mount has no disk tier. A mount's tiers hold the
blocks of its one volume only, so that is the volume's cached bytes on this
node; it costs one ``stats()`` (no scan). Per-directory figures would need a
block -> path index the caches do not keep.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping

from cloudfs.cache.interface import BlockTier
from cloudfs.lib.loop import Loop
from cloudfs.meta.client.cache_reports import CacheReportClient

log = logging.getLogger(__name__)

REPORT_SECONDS = 30.0
TTL_REPORTS = 3  # a report counts until 3 more were missed
NODE_ENV = "CLOUDFS_NODE_NAME"
INTERVAL_ENV = "CLOUDFS_CACHE_REPORT_SECONDS"


def node_name(env: Mapping[str, str] = os.environ) -> str:
    """This node's name as the scheduler knows it: ``CLOUDFS_NODE_NAME``, else the host's."""
    return env.get(NODE_ENV, "").strip() or socket.gethostname()


def report_interval(env: Mapping[str, str] = os.environ) -> float:
    """``CLOUDFS_CACHE_REPORT_SECONDS`` (at least 1), else ``REPORT_SECONDS``."""
    raw = env.get(INTERVAL_ENV, "")
    try:
        return max(1.0, float(raw)) if raw else REPORT_SECONDS
    except ValueError:
        log.warning("%s=%r is not a number; every %g s", INTERVAL_ENV, raw, REPORT_SECONDS)
        return REPORT_SECONDS


def held_bytes(memory: BlockTier, disk: BlockTier) -> int:
    """The disk tier's payload bytes, or the memory tier's where there is no disk tier."""
    on_disk = disk.stats()
    return on_disk.bytes if on_disk.capacity_bytes > 0 else memory.stats().bytes


class CacheReporter(Loop):
    """Report ``held()`` for ``volume`` every ``interval`` seconds while running."""

    def __init__(
        self,
        client: CacheReportClient,
        volume: str,
        reporter: str,
        held: Callable[[], int],
        *,
        node: str,
        interval: float = REPORT_SECONDS,
    ) -> None:
        super().__init__("cache-report", interval, f"reporting the cache of {volume} on {node}")
        self._client = client
        self._volume = volume
        self._reporter = reporter
        self._held = held
        self._node = node
        self._ttl = interval * TTL_REPORTS

    def step(self) -> None:
        self._client.report(self._volume, self._node, self._reporter, self._held(), self._ttl)

    def close(self) -> None:
        """Stop reporting (the last report lapses after its TTL) and close the client."""
        self.stop()
        self._client.close()
