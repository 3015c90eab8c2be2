"""What both ends of the BlockCache service (proto/cloudfs/v1/cache.proto) agree on."""

from __future__ import annotations

import errno as E

import grpc

from cloudfs.meta.service.convert import ERRNO_KEY

__all__ = ["ERRNO_KEY", "MAX_BLOCK_BYTES", "MESSAGE_OPTIONS", "METHOD", "SERVICE", "status_of"]

SERVICE = "cloudfs.v1.BlockCache"
METHOD = f"/{SERVICE}/GetBlock"

MiB = 1024 * 1024
MAX_BLOCK_BYTES = 64 * MiB  # the largest --block-size
# gRPC refuses messages over 4 MiB by default; a reply is one block and a few fields.
MAX_MESSAGE_BYTES = MAX_BLOCK_BYTES + MiB
MESSAGE_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]

# A worker's own answers. Unlike the tree service's, EIO is UNAVAILABLE: GetBlock
# changes nothing, so "try elsewhere" is always safe. The errno in the trailers
# (ERRNO_KEY) tells the caller the worker itself answered, alive.
_STATUS = {
    E.ENOENT: grpc.StatusCode.NOT_FOUND,
    E.ESTALE: grpc.StatusCode.FAILED_PRECONDITION,
    E.EINVAL: grpc.StatusCode.INVALID_ARGUMENT,
    E.EILSEQ: grpc.StatusCode.INVALID_ARGUMENT,
    E.EACCES: grpc.StatusCode.PERMISSION_DENIED,
    E.EPERM: grpc.StatusCode.PERMISSION_DENIED,
    E.EISDIR: grpc.StatusCode.FAILED_PRECONDITION,
    E.EIO: grpc.StatusCode.UNAVAILABLE,
}


def status_of(errno: int) -> grpc.StatusCode:
    """The status a worker answers an ``FsError`` of ``errno`` with (UNAVAILABLE if unknown)."""
    return _STATUS.get(errno, grpc.StatusCode.UNAVAILABLE)
