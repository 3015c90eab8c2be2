"""PeerGroup: a mount's side of a cache group (the ``PeerTier`` of cloudfs/cache/interface.py).

For each block the loader misses, ask the member that owns it (``Ring``,
skipping members ``MemberHealth`` leaves out) with one GetBlock call; the
calls of one batch run at once (gRPC futures on one channel per member, so
one worker-thread hop of the mount covers the batch) and each has its own
deadline. Whatever fails comes back as ``None`` and the loader fetches that
block from the UFS itself: a peer can make a read faster, never make it fail.

* A member that was not reached, did not answer in time or refused the
  token is left out for a back-off (``health.py``); a dead worker costs one
  failed call (immediate when its port refuses, ``deadline`` when it hangs),
  then its blocks go to their next owner in the ring.
* A worker's answer about one block (NOT_FOUND, FAILED_PRECONDITION for a
  changed object, UNAVAILABLE from its object store: the status carries an
  errno) leaves the member in use; only that block is fetched locally.
* A reply of the wrong length is refused (and counted as an error), so a
  confused peer cannot hand the mount a torn block.

Metrics per member: ``cloudfs_peer_requests_total{member,result}`` (hit,
miss, error), ``cloudfs_peer_bytes_total``, ``cloudfs_peer_request_seconds``,
``cloudfs_peer_backoffs_total``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import grpc

from cloudfs.cache.interface import BlockAsk
from cloudfs.metrics import Metrics
from cloudfs.peers import wire
from cloudfs.peers.health import MemberHealth
from cloudfs.peers.ring import Ring
from cloudfs.ufs.factory import parse_uri
from cloudfs.v1 import cache_pb2 as pb

log = logging.getLogger(__name__)

# Per call. A worker's cold block is one object-store GET (tens of ms); a block it
# holds, a local read. Longer than this and the mount is better off asking the UFS.
DEADLINE_SECONDS = 5.0
_CHANNEL_OPTIONS = [
    *wire.MESSAGE_OPTIONS,
    # gRPC's reconnect back-off grows to 120 s by default: a restarted worker would be
    # ignored that long. MemberHealth paces the calls instead.
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.min_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", 5000),
]
_HITS = (pb.BLOCK_SOURCE_MEMORY, pb.BLOCK_SOURCE_DISK)

Pending = tuple[str, Any, float] | None  # (member, the call's future, when it was sent)


class PeerGroup:
    def __init__(
        self,
        members: Sequence[str],
        store_uri: str,
        metrics: Metrics,
        *,
        token: str | None = None,
        deadline: float = DEADLINE_SECONDS,
        health: MemberHealth | None = None,
    ) -> None:
        """``store_uri``: the mount's UFS (what workers open); ``members``: HOST:PORT each."""
        self._ring = Ring(members)
        self._store_uri = parse_uri(store_uri).normalized
        self._metrics = metrics
        self._deadline = deadline
        self._health = health or MemberHealth(probe_window=deadline + 1.0)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._channels = {
            m: grpc.insecure_channel(m, options=_CHANNEL_OPTIONS) for m in self.members
        }
        self._calls = {
            m: channel.unary_unary(
                wire.METHOD,
                request_serializer=pb.GetBlockRequest.SerializeToString,
                response_deserializer=pb.GetBlockReply.FromString,
            )
            for m, channel in self._channels.items()
        }

    @property
    def members(self) -> tuple[str, ...]:
        return self._ring.members

    def fetch(self, asks: Sequence[BlockAsk]) -> list[bytes | None]:
        """Each block from its owner, or ``None`` (fetch it yourself); blocking, bounded."""
        pending = [self._send(ask) for ask in asks]
        return [self._receive(ask, sent) for ask, sent in zip(asks, pending, strict=True)]

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()

    def _send(self, ask: BlockAsk) -> Pending:
        member = next((m for m in self._ring.ranked(ask.cache_key) if self._health.usable(m)), None)
        if member is None:
            return None  # every member is left out: the UFS it is
        request = pb.GetBlockRequest(
            store_uri=self._store_uri,
            key=ask.object_key,
            etag=ask.etag,
            object_size=ask.object_size,
            block_size=ask.block_size,
            index=ask.index,
        )
        try:
            future = self._calls[member].future(
                request, timeout=self._deadline, metadata=self._metadata
            )
        except Exception as exc:  # a closed channel: never the reader's problem
            log.warning("cache peer %s: cannot send: %r", member, exc)
            self._metrics.peer_requests.labels(member, "error").inc()
            return None
        return member, future, time.monotonic()

    def _receive(self, ask: BlockAsk, sent: Pending) -> bytes | None:
        if sent is None:
            return None
        member, future, started = sent
        try:
            reply = future.result()  # bounded by the call's deadline
        except grpc.RpcError as exc:
            self._failed(member, ask, exc)
            return None
        except Exception as exc:  # a cancelled future, a bug in a stub: fetch it ourselves
            log.warning("cache peer %s: %r", member, exc)
            self._metrics.peer_requests.labels(member, "error").inc()
            return None
        self._metrics.peer_latency.labels(member).observe(time.monotonic() - started)
        self._health.succeeded(member)
        data: bytes = reply.data
        if len(data) != ask.length:
            log.warning(
                "cache peer %s sent %d bytes for block %d of %r, not %d: ignored",
                member, len(data), ask.index, ask.object_key, ask.length,
            )  # fmt: skip
            self._metrics.peer_requests.labels(member, "error").inc()
            return None
        self._metrics.peer_requests.labels(member, "hit" if reply.source in _HITS else "miss").inc()
        self._metrics.peer_bytes.labels(member).inc(len(data))
        return data

    def _failed(self, member: str, ask: BlockAsk, exc: grpc.RpcError) -> None:
        self._metrics.peer_requests.labels(member, "error").inc()
        code = exc.code()
        details = exc.details() or ""
        trailing = dict(exc.trailing_metadata() or ())
        if wire.ERRNO_KEY in trailing:  # the worker answered, about this block only
            log.debug("cache peer %s: block %d of %r: %s %s", member, ask.index, ask.object_key,
                      code.name, details)  # fmt: skip
            return
        backoff = self._health.failed(member)
        self._metrics.peer_backoffs.labels(member).inc()
        log.warning(
            "cache peer %s failed (%s: %s); reading its blocks elsewhere for %g s",
            member, code.name if code is not None else "?", details, backoff,
        )  # fmt: skip
