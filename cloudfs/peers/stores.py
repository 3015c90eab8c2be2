"""Where a ``BlockWorker`` finds the store a block GET names (``StoreSource``).

``StoreCache``: the object stores a cache worker has opened, one per store URI.

A worker serves every volume it is asked for: each block GET names its store
by URI (``s3://bucket/prefix``, as the mount opened it), and the worker opens
it through ``cloudfs.ufs.factory`` with its own endpoint and credentials (the
environment, as for a mount), once per URI, wrapped in the UFS metrics. The
block keys of a store are salted with ``factory.store_id`` of the URI and the
worker's endpoint: what a mount with the same settings salts its keys with.

``file://`` stores are refused unless allowed (``--allow-file-stores``):
anyone holding the token could otherwise read any directory the worker can.
At most ``MAX_STORES`` stay open (least recently used go), so callers naming
ever new URIs cannot grow the worker without bound. Thread-safe.

``SingleStore``: a mount serving its own cache (``--cache-group-serve``) has
one store open, its volume's, and serves that one only: its tiers hold no
other store's blocks, and it must not become a reader of whatever its
credentials can reach. Its blocks are salted as the mount salts them, so
what the mount's own reads cached is what peers get.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cloudfs.config import S3Config
from cloudfs.errors import AccessDenied, InvalidArgument, StartupError, UsageError
from cloudfs.metrics import Metrics
from cloudfs.ufs.factory import open_store, parse_uri, store_id
from cloudfs.ufs.interface import ObjectStore
from cloudfs.ufs.metered import MeteredObjectStore

MAX_STORES = 256


@dataclass(frozen=True, slots=True)
class OpenStore:
    store: ObjectStore
    salt: str  # block keys of this store: block_key(salt, ...)


class StoreSource(Protocol):
    def get(self, uri: str) -> OpenStore:
        """The store of ``uri``: ``InvalidArgument`` for a URI that names no store,
        ``AccessDenied`` for one this process does not serve."""
        ...


class SingleStore:
    """One store, already open (a serving mount's own); any other URI is refused."""

    def __init__(self, uri: str, store: ObjectStore, salt: str) -> None:
        """``salt``: what the mount salts its block keys with (``MountConfig.store_id``)."""
        self._uri = parse_uri(uri).normalized
        self._opened = OpenStore(store, salt)

    def get(self, uri: str) -> OpenStore:
        try:
            normalized = parse_uri(uri).normalized
        except UsageError as e:
            raise InvalidArgument(str(e)) from None
        if normalized != self._uri:
            raise AccessDenied(f"{uri}: this mount serves blocks of {self._uri} only")
        return self._opened


class StoreCache:
    def __init__(
        self,
        s3: S3Config,
        metrics: Metrics,
        *,
        allow_file: bool = False,
        opener: Callable[[str, S3Config], ObjectStore] = open_store,
    ) -> None:
        self._s3 = s3
        self._metrics = metrics
        self._allow_file = allow_file
        self._open = opener
        self._lock = threading.Lock()
        self._stores: OrderedDict[str, OpenStore] = OrderedDict()

    def get(self, uri: str) -> OpenStore:
        """The store of ``uri``, opened on first use.

        Raises ``InvalidArgument`` for a URI that names no store (or one this
        worker cannot open), ``AccessDenied`` for a ``file://`` store not allowed.
        """
        try:
            parsed = parse_uri(uri)
        except UsageError as e:
            raise InvalidArgument(str(e)) from None
        if parsed.scheme == "file" and not self._allow_file:
            raise AccessDenied(f"{uri}: this worker serves no file:// stores")
        normalized = parsed.normalized
        with self._lock:  # opening makes no request (hdfs: a connection, once)
            found = self._stores.get(normalized)
            if found is not None:
                self._stores.move_to_end(normalized)
                return found
            try:
                inner = self._open(normalized, self._s3)
            except (StartupError, UsageError) as e:
                raise InvalidArgument(f"cannot open {normalized}: {e}") from None
            endpoint = self._s3.effective_endpoint() if parsed.scheme == "s3" else None
            opened = OpenStore(
                MeteredObjectStore(inner, self._metrics), store_id(normalized, endpoint)
            )
            self._stores[normalized] = opened
            while len(self._stores) > MAX_STORES:
                self._stores.popitem(last=False)
            return opened
