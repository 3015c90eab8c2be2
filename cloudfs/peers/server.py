"""CacheServer: a ``BlockWorker`` as the BlockCache gRPC service (proto/cloudfs/v1/cache.proto).

Each call runs in the server's thread pool. An ``FsError`` from the worker
becomes its status (``wire.status_of``: NOT_FOUND, FAILED_PRECONDITION for a
changed object, INVALID_ARGUMENT, PERMISSION_DENIED, UNAVAILABLE for the
object store's failures) with the errno in the trailing metadata, which tells
the caller the worker is alive and the trouble is this block's; anything
else is logged with its traceback and answered UNAVAILABLE with EIO.
Every reply carries the CRC-32 of its bytes; a ``fill_only`` call (warm-up
through the group) gets no bytes, only where the block was.

With a token, every call must carry ``authorization: Bearer <token>``
(UNAUTHENTICATED otherwise, without an errno: the caller stops asking this
worker for a while, as it would a dead one).
"""

from __future__ import annotations

import errno
import hmac
import logging
import zlib
from concurrent import futures
from typing import NoReturn

import grpc

from cloudfs.errors import FsError
from cloudfs.meta.service.convert import printable
from cloudfs.metrics import Metrics
from cloudfs.peers import wire
from cloudfs.peers.worker import BlockRequest, BlockWorker
from cloudfs.v1 import cache_pb2 as pb

log = logging.getLogger(__name__)

SOURCES = {
    "memory": pb.BLOCK_SOURCE_MEMORY,
    "disk": pb.BLOCK_SOURCE_DISK,
    "origin": pb.BLOCK_SOURCE_ORIGIN,
}


class CacheServer:
    """A gRPC server for ``worker``; ``start()`` serves ``address``, ``stop()`` ends it."""

    def __init__(
        self,
        worker: BlockWorker,
        address: str,
        metrics: Metrics,
        *,
        token: str | None = None,
        threads: int = 64,
    ) -> None:
        """``threads``: calls served at once (each may wait for an object-store GET)."""
        self._worker = worker
        self._metrics = metrics
        self._expected = f"Bearer {token}".encode() if token else None
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="block-cache"),
            # Not SO_REUSEPORT (gRPC's default): a second worker on a port in use must fail.
            options=[*wire.MESSAGE_OPTIONS, ("grpc.so_reuseport", 0)],
        )
        handler = grpc.unary_unary_rpc_method_handler(
            self._get_block,
            request_deserializer=pb.GetBlockRequest.FromString,
            response_serializer=pb.GetBlockReply.SerializeToString,
        )
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(wire.SERVICE, {"GetBlock": handler}),)
        )
        self.port = self._server.add_insecure_port(address)
        if self.port == 0:
            raise OSError(errno.EADDRINUSE, f"cannot listen on {address}")

    def start(self) -> None:
        self._server.start()

    def stop(self, grace: float = 2.0) -> None:
        self._server.stop(grace).wait()

    def _get_block(
        self, request: pb.GetBlockRequest, context: grpc.ServicerContext
    ) -> pb.GetBlockReply:
        if self._expected is not None:
            sent = dict(context.invocation_metadata()).get("authorization", "")
            if not hmac.compare_digest(str(sent).encode(), self._expected):
                self._metrics.worker_blocks.labels("unauthenticated").inc()
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token")
        asked = BlockRequest(
            store_uri=request.store_uri,
            key=request.key,
            etag=request.etag,
            object_size=request.object_size,
            block_size=request.block_size,
            index=request.index,
        )
        try:
            if request.fill_only:
                data, source = b"", self._worker.fill(asked)
            else:
                data, source = self._worker.get_block(asked)
        except FsError as exc:
            self._abort(context, exc.errno, str(exc) or type(exc).__name__)
        except Exception:
            log.exception(
                "GetBlock %s block %d of %r failed", asked.store_uri, asked.index, asked.key
            )
            self._abort(context, errno.EIO, "internal error")
        self._metrics.worker_blocks.labels(source).inc()
        self._metrics.worker_bytes.labels(source).inc(len(data))
        return pb.GetBlockReply(data=data, source=SOURCES[source], crc32=zlib.crc32(data))

    def _abort(self, context: grpc.ServicerContext, code: int, message: str) -> NoReturn:
        """Answer with ``code``'s status and errno (``context.abort`` raises)."""
        status = wire.status_of(code)
        self._metrics.worker_blocks.labels(status.name.lower()).inc()
        context.set_trailing_metadata(((wire.ERRNO_KEY, str(code)),))
        context.abort(status, printable(message))
        raise AssertionError("unreachable: grpc's abort raises")
