"""The one translation from CloudFS's errno-carrying ``FsError`` to S3's error codes.

Every layer below the gateway raises ``cloudfs.errors.FsError``; clients expect
S3's codes (``NoSuchKey``, ``AccessDenied``, ``SlowDown``...), which their
retry logic keys on: ``SlowDown``/``ServiceUnavailable`` (503) are retried by
botocore, s3a and pyarrow, so the transient errnos (a stale object version, a
write-back still uploading, a lost transaction race) map there.
"""

from __future__ import annotations

import errno

from cloudfs.errors import FsError
from cloudfs.gateway.errors import S3Error

_TRANSIENT = {errno.ESTALE, errno.EBUSY, errno.EAGAIN, errno.ETIMEDOUT}
_DENIED = {errno.EACCES, errno.EPERM, errno.EROFS}
# A name the write cannot take: a directory there, a file where a directory must be.
_CONFLICT = {errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ENOTEMPTY}


def s3_error(e: FsError, resource: str, *, writing: bool = False) -> S3Error:
    """The S3 error a client sees for ``e`` about ``resource`` (``/bucket/key``).

    ``writing``: the request changes the key (a PUT, a copy's target); reads see
    a directory or a missing parent as no object at all, as S3 would.
    """
    code = e.errno
    if code in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR) and not writing:
        return S3Error("NoSuchKey", 404, "The specified key does not exist.", resource=resource)
    if code == errno.ENOENT:  # a parent removed by a concurrent delete: worth a retry
        return S3Error(
            "SlowDown",
            503,
            f"a parent of the key vanished meanwhile, retry: {e}",
            resource=resource,
        )
    if code in _CONFLICT:
        return S3Error(
            "InvalidRequest",
            409,
            f"the key conflicts with the volume's tree ({errno.errorcode.get(code, code)}: {e}):"
            " a file cannot also be a directory",
            resource=resource,
        )
    if code == errno.ENAMETOOLONG:
        return S3Error("KeyTooLongError", 400, f"Your key is too long: {e}", resource=resource)
    if code in (errno.EILSEQ, errno.EINVAL):
        return S3Error("InvalidArgument", 400, str(e), resource=resource)
    if code in _DENIED:
        what = "the volume is read-only" if code == errno.EROFS else str(e)
        return S3Error("AccessDenied", 403, f"Access Denied: {what}", resource=resource)
    if code in _TRANSIENT:
        return S3Error("SlowDown", 503, f"Please reduce your request rate: {e}", resource=resource)
    if code == errno.ENOSPC:
        return S3Error("ServiceUnavailable", 503, f"no space to stage: {e}", resource=resource)
    return S3Error(
        "InternalError", 500, f"We encountered an internal error: {e}", resource=resource
    )
