"""Failures as CSI sees them: each exception carries the gRPC status code the spec names.

Services raise these; ``server.py`` is the one place that turns them into
gRPC statuses. Messages name paths and volume ids, never secrets.
"""

from __future__ import annotations

import errno as _errno

import grpc

from cloudfs.errors import FsError, StartupError, UsageError


class CsiError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.INTERNAL


class InvalidArgument(CsiError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(CsiError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(CsiError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(CsiError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class OutOfRange(CsiError):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unavailable(CsiError):
    code = grpc.StatusCode.UNAVAILABLE


class Internal(CsiError):
    code = grpc.StatusCode.INTERNAL


class PermissionDenied(CsiError):
    code = grpc.StatusCode.PERMISSION_DENIED


def from_cloudfs(
    exc: FsError | UsageError | StartupError, what: str, *, tls_hint: str = ""
) -> CsiError:
    """The CSI error a failed cloudfs call (the tree service, a mount) stands for.

    A tree service that could not be reached is UNAVAILABLE (the CO retries), a
    failed TLS handshake included; ``tls_hint`` then says where the caller's TLS
    material comes from.
    """
    message = f"{what}: {exc}"
    if isinstance(exc, UsageError):
        return InvalidArgument(message)
    if isinstance(exc, StartupError):
        return Internal(message)
    table: dict[int, type[CsiError]] = {
        _errno.ENOENT: NotFound,
        _errno.EEXIST: AlreadyExists,
        _errno.EINVAL: InvalidArgument,
        _errno.EACCES: PermissionDenied,
        _errno.EPERM: PermissionDenied,
    }
    text = str(exc)
    if exc.errno == _errno.EIO and "TLS" in text:
        return Unavailable(f"{message}{'; ' + tls_hint if tls_hint else ''}")
    if exc.errno == _errno.EIO and ("unreachable" in text or "did not answer" in text):
        return Unavailable(message)
    return table.get(exc.errno, Internal)(message)
