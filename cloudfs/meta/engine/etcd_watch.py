"""Watching a key range of etcd through its gRPC Watch service, forever.

A watch is one bidirectional stream (``Watch.Watch``): we send a
``WatchCreateRequest`` (the range, and ``start_revision`` when resuming); etcd
answers ``created`` with the revision it starts after, then a ``WatchResponse``
per batch of events (a delete's ``kv`` has no value). etcd never splits the
events of one revision across responses (we do not ask for ``fragment``).

``EtcdWatch`` iterates over those batches and hides streams: a stream that
breaks, whose member dies or loses its leader (we send ``hasleader``, so etcd
ends the stream then), or that stays silent past ``idle`` seconds although we
ask for progress every third of it, is opened again on the next endpoint, from
the revision after the last one seen, so nothing is missed or repeated. When
etcd compacted that revision away (the watcher was gone too long) the iterator
yields ``None``: changes were lost, and it goes on from the oldest revision etcd
still has (its ``compact_revision``), so nothing after that is lost too.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import grpc

from cloudfs.etcdpb import kv_pb2
from cloudfs.etcdpb import rpc_pb2 as pb
from cloudfs.meta.engine.kv import WatchEvent

if TYPE_CHECKING:
    from cloudfs.meta.engine.etcd_grpc import EtcdClient

log = logging.getLogger(__name__)

IDLE = 30.0  # seconds without an answer after which the stream is opened again
PAUSE_MAX = 2.0  # seconds between attempts once every endpoint failed
REQUIRE_LEADER = (("hasleader", "true"),)  # etcd ends the stream if its member has no leader


class _Ended(Exception):
    """etcd ended the stream (canceled it, or closed it)."""


class _Stream:
    """One open Watch call: what its request side needs to see from the answer side."""

    def __init__(self) -> None:
        self.call: Any = None
        self.heard = time.monotonic()  # the last answer
        self.ended = threading.Event()


class EtcdWatch:
    """Events on [``key``, ``end``) (full etcd keys); their keys lose the first ``strip`` bytes."""

    def __init__(
        self, client: EtcdClient, key: bytes, end: bytes, *, strip: int = 0, idle: float = IDLE
    ) -> None:
        self._client = client
        self._count = len(client.endpoints)
        self._key, self._end, self._strip = key, end, strip
        self._idle = idle
        self._next = 0  # the first revision not seen yet; 0: from the present
        self._closed = threading.Event()
        self._stream: _Stream | None = None
        self._guard = threading.Lock()
        self.ready = threading.Event()  # set once the first stream is established

    def __iter__(self) -> Iterator[list[WatchEvent] | None]:
        failures = 0
        while not self._closed.is_set():
            index = failures % self._count
            try:
                for batch in self._open(index):
                    failures = 0
                    yield batch
            except (grpc.RpcError, _Ended) as exc:
                if self._closed.is_set():
                    return
                failures += 1
                if failures % self._count == 0:
                    pause = min(PAUSE_MAX, 0.05 * 2 ** (failures // self._count))
                    url = self._client.endpoints[index]
                    log.warning("etcd watch: %s failed (%r); again in %.1f s", url, exc, pause)
                    self._closed.wait(pause * random.uniform(0.5, 1.0))

    def _open(self, index: int) -> Iterator[list[WatchEvent] | None]:
        stream = _Stream()
        create = pb.WatchCreateRequest(key=self._key, range_end=self._end)
        create.start_revision = self._next
        requests = self._requests(stream, pb.WatchRequest(create_request=create))
        with self._guard:
            if self._closed.is_set():
                return
            stream.call = self._client.watch_stub(index).Watch(requests, metadata=REQUIRE_LEADER)
            self._stream = stream
        try:
            for response in stream.call:
                stream.heard = time.monotonic()
                if response.compact_revision:  # our revision is gone: from the oldest kept
                    self._next = response.compact_revision
                    yield None
                    return
                if response.created:
                    if not self._next:
                        self._next = response.header.revision + 1
                    self.ready.set()
                if response.canceled:
                    raise _Ended(f"etcd canceled the watch: {response.cancel_reason}")
                events = [self._event(e) for e in response.events]
                if events:
                    self._next = max(e.revision for e in events) + 1
                    yield events
            raise _Ended("the watch stream ended")
        finally:
            with self._guard:
                self._stream = None
            stream.ended.set()
            stream.call.cancel()

    def _requests(self, stream: _Stream, create: pb.WatchRequest) -> Iterator[pb.WatchRequest]:
        """What we send (gRPC reads it in its own thread): the create, then a progress
        request every third of ``idle``; a stream still silent after ``idle`` is canceled."""
        yield create
        while not stream.ended.wait(self._idle / 3):
            if time.monotonic() - stream.heard > self._idle:
                log.warning("etcd watch: no answer for %.0f s; opening it again", self._idle)
                stream.call.cancel()
                return
            yield pb.WatchRequest(progress_request=pb.WatchProgressRequest())

    def _event(self, event: kv_pb2.Event) -> WatchEvent:
        kv = event.kv
        deleted = event.type == kv_pb2.Event.DELETE
        return WatchEvent(kv.key[self._strip :], None if deleted else kv.value, kv.mod_revision)

    def close(self) -> None:
        """End the iteration (from any thread)."""
        self._closed.set()
        with self._guard:
            stream = self._stream
        if stream is not None:
            stream.call.cancel()
