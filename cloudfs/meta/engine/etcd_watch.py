"""Watching a key range of etcd through its JSON gateway (``POST /v3/watch``), forever.

The gateway answers a watch with a chunked stream of JSON lines: first
``{"result": {"created": true, "header": {"revision": R}}}``, then one line per
batch of events (``{"result": {"events": [{"type": "DELETE"?, "kv": {...}}]}}``;
a put has no ``type``, a delete's ``kv`` has no value). etcd never splits the
events of one revision across lines.

``EtcdWatch`` iterates over those batches and hides connections: a stream that
breaks, stalls past ``idle`` seconds or whose member dies is opened again on
the next endpoint, from the revision after the last one seen, so nothing is
missed or repeated. When etcd compacted that revision away (the watcher was
gone too long) the iterator yields ``None``: changes were lost, and it goes on
from the present.
"""

from __future__ import annotations

import http.client
import json
import logging
import random
import socket
import threading
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

from cloudfs.meta.engine.etcd_gateway import b64, parse_endpoint, unb64
from cloudfs.meta.engine.kv import WatchEvent

log = logging.getLogger(__name__)

IDLE = 30.0  # seconds without a line after which the stream is opened again
PAUSE_MAX = 2.0  # seconds between attempts once every endpoint failed


class EtcdWatch:
    """Events on [``key``, ``end``) (full etcd keys); their keys lose the first ``strip`` bytes."""

    def __init__(
        self,
        endpoints: list[str],
        key: bytes,
        end: bytes,
        timeout: float,
        *,
        strip: int = 0,
        idle: float = IDLE,
    ) -> None:
        self._endpoints = [parse_endpoint(e) for e in endpoints]
        self._key, self._end, self._strip = key, end, strip
        self._timeout, self._idle = timeout, idle
        self._next = 0  # the first revision not seen yet; 0: from the present
        self._closed = threading.Event()
        self._conn: http.client.HTTPConnection | None = None
        self._guard = threading.Lock()
        self.ready = threading.Event()  # set once the first stream is established

    def __iter__(self) -> Iterator[list[WatchEvent] | None]:
        failures = 0
        while not self._closed.is_set():
            _, host, port = self._endpoints[failures % len(self._endpoints)]
            try:
                for batch in self._stream(host, port):
                    failures = 0
                    yield batch
            except (OSError, http.client.HTTPException, ValueError, KeyError) as exc:
                if self._closed.is_set():
                    return
                failures += 1
                if failures % len(self._endpoints) == 0:
                    pause = min(PAUSE_MAX, 0.05 * 2 ** (failures // len(self._endpoints)))
                    log.warning("etcd watch: %s:%d failed (%r); again in %.1f s", host, port,
                                exc, pause)  # fmt: skip
                    self._closed.wait(pause * random.uniform(0.5, 1.0))

    def _stream(self, host: str, port: int) -> Iterator[list[WatchEvent] | None]:
        conn = http.client.HTTPConnection(host, port, timeout=self._timeout)
        with self._guard:
            if self._closed.is_set():
                return
            self._conn = conn
        try:
            create: dict[str, Any] = {"key": b64(self._key), "range_end": b64(self._end)}
            if self._next:
                create["start_revision"] = str(self._next)
            conn.request("POST", "/v3/watch", body=json.dumps({"create_request": create}))
            response = conn.getresponse()
            if response.status != 200:
                raise http.client.HTTPException(f"HTTP {response.status}: {response.read(200)!r}")
            assert conn.sock is not None
            conn.sock.settimeout(self._idle)
            while not self._closed.is_set():
                line = response.readline()
                if not line:
                    raise http.client.HTTPException("the watch stream ended")
                result = json.loads(line).get("result", {})
                if result.get("compact_revision"):  # our revision is gone: start afresh
                    self._next = 0
                    yield None
                    return
                if result.get("created"):
                    if not self._next:
                        self._next = int(result["header"]["revision"]) + 1
                    self.ready.set()
                events = [self._event(e) for e in result.get("events", [])]
                if events:
                    self._next = max(e.revision for e in events) + 1
                    yield events
        except TimeoutError:
            return  # a quiet stream: open it again (on the same member)
        finally:
            with self._guard:
                self._conn = None
            conn.close()

    def _event(self, event: dict[str, Any]) -> WatchEvent:
        kv = event["kv"]
        deleted = event.get("type") == "DELETE"
        return WatchEvent(
            unb64(kv["key"])[self._strip :],
            None if deleted else unb64(kv.get("value", "")),
            int(kv["mod_revision"]),
        )

    def close(self) -> None:
        """End the iteration (from any thread)."""
        self._closed.set()
        with self._guard:
            conn = self._conn
        if conn is not None and conn.sock is not None:
            with suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
