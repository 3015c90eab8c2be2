"""The one place where botocore/boto3 failures become ``cloudfs.errors``.

Every S3 call in ``s3.py`` funnels its exceptions through :func:`translate`, so
the mapping (and the decision of what is retryable, i.e. ``RemoteIOError``) is
written once. The original exception is kept as ``__cause__`` so logs still show
the request id and the raw S3 error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from boto3.exceptions import Boto3Error
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
    ResponseStreamingError,
)

from cloudfs.errors import (
    FsError,
    IllegalName,
    InvalidArgument,
    NameTooLong,
    NotFound,
    ObjectChanged,
    RemoteIOError,
    UfsAccessDenied,
)

_NOT_FOUND_CODES = frozenset({"NoSuchKey", "NoSuchBucket", "NotFound", "404"})
_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "AllAccessDisabled",
        "AccountProblem",
        "403",
    }
)
_INVALID_CODES = frozenset({"InvalidRange", "416", "InvalidObjectName"})

T = TypeVar("T")


def _botocore_error(err: BaseException) -> BaseException:
    """The botocore error behind ``err``.

    boto3's managed upload re-raises a ``ClientError`` as ``S3UploadFailedError``
    without ``from``; the original survives only as ``__context__``.
    """
    seen: set[int] = set()
    cur: BaseException | None = err
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, ClientError | BotoCoreError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return err


def error_code(err: ClientError) -> str:
    """The S3 error code (``NoSuchKey``) or, for bodiless HEAD replies, the HTTP status."""
    code = str(err.response.get("Error", {}).get("Code", "") or "")
    if code:
        return code
    return str(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))


def http_status(err: ClientError) -> int:
    """The HTTP status of a failed S3 reply, 0 when botocore did not record one."""
    status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return int(status or 0)


def _what(key: str) -> str:
    return f"'{key}'" if key else "S3"


def _translate_client_error(err: ClientError, key: str) -> FsError:
    code = error_code(err)
    status = http_status(err)
    message = str(err.response.get("Error", {}).get("Message", "") or code)
    if code == "NoSuchBucket":
        return NotFound(f"{_what(key)}: bucket does not exist")
    if code in _NOT_FOUND_CODES or status == 404:
        return NotFound(f"{_what(key)}: no such object")
    if code in _DENIED_CODES or status == 403:
        return UfsAccessDenied(f"{_what(key)}: access denied by S3 ({code}): check credentials")
    if code == "PreconditionFailed" or status == 412:  # a conditional GET's If-Match
        return ObjectChanged(f"{_what(key)}: the object is not the version asked for")
    if code == "KeyTooLongError":  # what validate_s3_key refuses up front, if it got past
        return NameTooLong(f"{_what(key)}: S3 keys are at most 1024 bytes ({message})")
    if code in _INVALID_CODES or status == 416:
        return InvalidArgument(f"{_what(key)}: S3 rejected the request ({code}: {message})")
    return RemoteIOError(f"{_what(key)}: S3 error {code} (HTTP {status}): {message}")


def translate(err: BaseException, key: str = "") -> FsError:
    """Map a botocore/boto3 exception to the ``cloudfs.errors`` type the caller sees.

    Args:
        err: what boto3 raised (``ClientError``, a ``BotoCoreError``, or a boto3
            wrapper whose ``__context__`` is one of those).
        key: the store key involved, for the message ("" for bucket-level calls).

    Returns:
        ``NotFound`` (NoSuchKey, NoSuchBucket, 404), ``UfsAccessDenied``
        (AccessDenied, bad key or signature, 403), ``ObjectChanged`` (an If-Match
        that failed, 412), ``InvalidArgument`` (bad range
        or name) or ``RemoteIOError`` (timeouts, refused connections, 5xx,
        anything else). The result's ``__cause__`` is ``err``, so a caller that
        writes ``raise translate(e, key)`` without ``from`` keeps the chain.
    """
    inner = _botocore_error(err)
    result: FsError
    if isinstance(inner, ClientError):
        result = _translate_client_error(inner, key)
    elif isinstance(inner, NoCredentialsError | PartialCredentialsError):
        result = UfsAccessDenied(f"{_what(key)}: no usable AWS credentials found ({inner})")
    elif isinstance(inner, EndpointConnectionError | ConnectTimeoutError):
        result = RemoteIOError(f"{_what(key)}: cannot reach S3 endpoint: {inner}")
    elif isinstance(inner, ReadTimeoutError):
        result = RemoteIOError(f"{_what(key)}: S3 endpoint did not answer in time: {inner}")
    elif isinstance(inner, ConnectionClosedError | ResponseStreamingError):
        result = RemoteIOError(f"{_what(key)}: S3 connection broke: {inner}")
    else:
        result = RemoteIOError(f"{_what(key)}: S3 request failed: {inner}")
    result.__cause__ = err
    return result


@contextmanager
def translating(key: str) -> Iterator[None]:
    """Run the block, turning any boto3/botocore failure into :func:`translate`'s result."""
    try:
        yield
    except (ClientError, BotoCoreError, Boto3Error) as err:
        raise translate(err, key) from err


# SlowDown is S3 asking the client to back off: a burst of them can outlast botocore's
# own attempts (``S3Config.max_attempts``). An idempotent step of a rename is tried
# again after these pauses (about 7 s more in all); a store that is down instead (no
# connection, 500s) is not waited for here.
THROTTLE_PAUSES = (0.5, 1.0, 2.0, 3.5)
_THROTTLE_CODES = frozenset({"SlowDown", "ServiceUnavailable", "503", "Throttling"})


def throttled(err: ClientError) -> bool:
    return error_code(err) in _THROTTLE_CODES or http_status(err) == 503


def patiently(call: Callable[[], T]) -> T:
    """``call()`` (idempotent), tried again after ``THROTTLE_PAUSES`` while S3 throttles."""
    for pause in (*THROTTLE_PAUSES, None):
        try:
            return call()
        except ClientError as err:
            if pause is None or not throttled(err):
                raise
            time.sleep(pause)
    raise AssertionError("unreachable")


# -- what S3 would refuse, refused before the request ----------------------------

S3_KEY_MAX = 1024


def validate_s3_key(key: str) -> None:
    """S3 object keys are UTF-8 strings of at most 1024 bytes.

    ``IllegalName`` (EILSEQ) for a key that is not UTF-8, ``NameTooLong``
    (ENAMETOOLONG) for one over 1024 bytes.
    """
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError:
        raise IllegalName(f"{key!r} is not valid UTF-8, which S3 keys must be") from None
    if len(encoded) > S3_KEY_MAX:
        raise NameTooLong(f"S3 keys are at most {S3_KEY_MAX} bytes; this one is {len(encoded)}")
