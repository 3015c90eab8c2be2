"""Buckets: the volumes the gateway serves, each opened once as a ``VolumeHandle``.

``--volume NAME`` (repeatable) limits the gateway to those volumes; without it
every volume of the tree service is a bucket, looked up per request, so a
volume created after the gateway started is served without a restart. A
handle stays open for the gateway's life (one gRPC channel, one object-store
client and one in-memory block cache per volume).
"""

from __future__ import annotations

import contextlib
import threading

from cloudfs.client.options import ClientOptions
from cloudfs.client.volume import VolumeHandle
from cloudfs.errors import FsError, NotFound, UsageError
from cloudfs.gateway.errors import S3Error
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.metrics import Metrics


class Buckets:
    def __init__(
        self, options: ClientOptions, metrics: Metrics, allowed: tuple[str, ...] = ()
    ) -> None:
        """``allowed``: the volumes to serve (empty: every volume of the tree service)."""
        self.options = options
        self._metrics = metrics
        self._allowed = frozenset(allowed)
        self._lock = threading.Lock()
        self._open: dict[str, VolumeHandle] = {}

    def handle(self, bucket: str) -> VolumeHandle:
        """The open handle of ``bucket``; ``NoSuchBucket`` (404) for one not served."""
        with self._lock:
            handle = self._open.get(bucket)
        if handle is not None:
            return handle
        if self._allowed and bucket not in self._allowed:
            raise _no_such_bucket(bucket)
        try:
            opened = VolumeHandle(self.options, bucket, self._metrics)
        except (NotFound, UsageError):  # UsageError: not even a valid volume name
            raise _no_such_bucket(bucket) from None
        with self._lock:
            handle = self._open.setdefault(bucket, opened)
        if handle is not opened:
            opened.close()
        return handle

    def names(self) -> list[str]:
        """The buckets, sorted (ListBuckets)."""
        if self._allowed:
            return sorted(self._allowed)
        options = self.options
        client = VolumeClient(
            options.meta_server, token=options.token, timeout=options.timeout, tls=options.tls
        )
        try:
            return sorted(spec.name for spec in client.list())
        finally:
            client.close()

    def close(self) -> None:
        with self._lock:
            handles, self._open = list(self._open.values()), {}
        for handle in handles:
            with contextlib.suppress(FsError):
                handle.close()


def _no_such_bucket(bucket: str) -> S3Error:
    return S3Error(
        "NoSuchBucket", 404, "The specified bucket does not exist", resource=f"/{bucket}"
    )
