"""CacheServer: a ``BlockWorker`` served over plain HTTP/1.1 (the wire of ``wire.py``).

The server is ``cloudfs.lib.http_server.ThreadedHTTPServer``: one thread per
connection, keep-alive, TCP_NODELAY; an idle connection is closed after
``IDLE_SECONDS`` so a mount that went away pins no thread. ``threads`` bounds
the blocks served at once (a slot around the worker call, which may wait for
an object-store GET), not the connections: a mount keeps one connection per
thread of its pool, most of them idle between batches, and an idle one must
not hold up another mount's call until its deadline. Each client host may
hold at most ``max_connections_per_client`` connections (so one cannot take a
thread per connection without end); past that it is answered 503 and closed.

An ``FsError`` from the worker becomes its status (``wire.status_of``) with the
errno in ``X-Cloudfs-Errno``, which tells the caller the worker is alive and the
trouble is this block's; anything else is logged with its traceback and
answered 503 with EIO. Every 200 carries the CRC-32 of its bytes; a ``fill=1``
call (warm-up through the group) gets no bytes, only where the block was.

With a token, every call must carry ``Authorization: Bearer <token>`` (401
otherwise, without an errno: the caller stops asking this worker for a while,
as it would a dead one); a token file is re-read when it changes
(``cloudfs/tokens.py``). With ``tls`` every connection is TLS (mTLS with its
client CA), its handshake done in the connection's thread (``cloudfs/tls.py``).

The same server listens on a UNIX socket when its address is a path (a mount
serving its blocks to the node's other processes, ``cloudfs.client``): the
socket file is created 0600, so only the mount's user reaches it and no token
is needed, and removed when the server stops. Such a server may be limited to
one ``block_size`` (the mount's own): a block of another size would fill the
mount's tiers with blocks its own reads never look up.
"""

from __future__ import annotations

import errno
import logging
import threading
import zlib
from http import HTTPStatus
from typing import Any, cast
from urllib.parse import urlsplit

from cloudfs.errors import FsError, InvalidArgument
from cloudfs.lib.http_server import ConnectionHandler, ThreadedHTTPServer
from cloudfs.meta.wire.convert import printable
from cloudfs.metrics import Metrics
from cloudfs.peers import wire
from cloudfs.peers.worker import BlockRequest, BlockWorker
from cloudfs.tls import ServerTLS
from cloudfs.tokens import Token, accepts, token_source

log = logging.getLogger(__name__)

IDLE_SECONDS = 60.0  # an idle keep-alive connection is closed after this
# Connections one client host may hold open at once: a mount keeps up to 32 per
# member (transport.POOL_THREADS), so eight mounts of one node fit.
MAX_CONNECTIONS_PER_CLIENT = 256


class CacheServer(ThreadedHTTPServer):
    """An HTTP server for ``worker``; ``start()`` serves ``address``, ``stop()`` ends it."""

    def __init__(
        self,
        worker: BlockWorker,
        address: str,
        metrics: Metrics,
        *,
        token: Token | None = None,
        threads: int = 64,
        idle_seconds: float = IDLE_SECONDS,
        block_size: int | None = None,
        tls: ServerTLS | None = None,
        max_connections_per_client: int = MAX_CONNECTIONS_PER_CLIENT,
    ) -> None:
        """``address``: HOST:PORT ([v6]:PORT; port 0 picks one, see ``port``) or the
        absolute path of a UNIX socket; ``threads``: blocks served at once;
        ``idle_seconds``: how long a keep-alive connection may wait for its next
        request; ``block_size``: the only block size served (None: any); ``tls``: serve
        TLS (not on a UNIX socket); ``max_connections_per_client``: connections open at
        once per client host (0: no limit; a UNIX socket's callers are not counted).
        ``OSError`` (EADDRINUSE...) if it cannot listen."""
        super().__init__(
            address, _Handler, name="block-cache", threads=threads, idle_seconds=idle_seconds,
            tls=tls, max_connections_per_client=max_connections_per_client,
        )  # fmt: skip
        self._block_size = block_size
        self._worker = worker
        self._metrics = metrics
        self._token = token_source(token)

    def authorized(self, sent: str | None) -> bool:
        """Constant-time: how much of a wrong token matched must not show in the time."""
        if accepts(self._token, sent):
            return True
        self._metrics.worker_blocks.labels("unauthenticated").inc()
        return False

    def serve(self, query: wire.Query) -> tuple[bytes, str]:
        """The block's bytes (none for a fill) and where they were; ``FsError``s pass."""
        if self._block_size is not None and query.block_size != self._block_size:
            raise InvalidArgument(
                f"block_size {query.block_size}: this server's blocks are {self._block_size} bytes"
            )
        asked = BlockRequest(
            store_uri=query.store_uri,
            key=query.key,
            etag=query.etag,
            object_size=query.object_size,
            block_size=query.block_size,
            index=query.index,
        )
        with self.slot():
            try:
                if query.fill:
                    data, source = b"", self._worker.fill(asked)
                else:
                    data, source = self._worker.get_block(asked)
            except FsError:
                raise
            except Exception as exc:
                log.exception(
                    "GET block %s block %d of %r failed", asked.store_uri, asked.index, asked.key
                )
                raise FsError("internal error", errno=errno.EIO) from exc
        self._metrics.worker_blocks.labels(source).inc()
        self._metrics.worker_bytes.labels(source).inc(len(data))
        return data, source

    def refused(self, status: HTTPStatus) -> None:
        self._metrics.worker_blocks.labels(status.phrase.lower().replace(" ", "_")).inc()

    def refused_connection(self) -> None:
        self.refused(HTTPStatus.SERVICE_UNAVAILABLE)


class _Ticking:
    """While the block is on its way (a free slot, an object-store GET), an interim
    ``100 Continue`` every ``wire.TICK_SECONDS`` after the first, so the caller's read
    timeout tells this live worker from a silent one (wire.py). Stopped, and its
    thread joined, before the real answer is written: nothing interleaves with it."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="block-tick", daemon=True)

    def __enter__(self) -> _Ticking:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _tick(self) -> None:
        while not self._done.wait(wire.TICK_SECONDS):
            try:
                self._out.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            except OSError:  # the caller went away: the answer will fail the same way
                return


class _Handler(ConnectionHandler):
    """One connection: its block GETs one after the other."""

    server_version = "cloudfs-cache"

    def do_GET(self) -> None:
        cache = cast(CacheServer, self.owner)
        if self.headers.get("Content-Length", "0") != "0":
            self.close_connection = True  # a body we will not read: no next request
        target = urlsplit(self.path)
        if target.path != wire.BLOCK_PATH:
            self._text(HTTPStatus.NOT_FOUND, f"no {target.path!r} here")
            return
        if not cache.authorized(self.headers.get("Authorization")):
            self._text(HTTPStatus.UNAUTHORIZED, "missing or wrong token")
            return
        try:
            query = wire.Query.parse(target.query)
        except ValueError as exc:
            self._refuse(cache, errno.EINVAL, f"bad block query: {exc}")
            return
        try:
            with _Ticking(self.wfile):  # a slow origin is not a silent worker
                data, source = cache.serve(query)
        except FsError as exc:
            self._refuse(cache, exc.errno, str(exc) or type(exc).__name__)
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.send_header(wire.SOURCE_HEADER, source)
        self.send_header(wire.CRC_HEADER, str(zlib.crc32(data)))
        self.end_headers()
        self.wfile.write(data)

    def _refuse(self, cache: CacheServer, code: int, message: str) -> None:
        status = wire.status_of(code)
        cache.refused(status)
        self._text(status, message, {wire.ERRNO_HEADER: str(code)})

    def _text(
        self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None
    ) -> None:
        body = (printable(message).replace("\n", " ") + "\n").encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _not_allowed(self) -> None:
        self.close_connection = True  # whatever body it sent is not read
        self._text(HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command} is not served here")

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed
