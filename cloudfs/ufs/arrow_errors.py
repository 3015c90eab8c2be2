"""pyarrow's errors as ``cloudfs.errors``, for ``arrow.ArrowObjectStore`` and ``hdfs``."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

from cloudfs.errors import FsError, InvalidArgument, NotSupported, RemoteIOError
from cloudfs.ufs.dirstore import ERRNO_TYPES


def first_line(err: BaseException) -> str:
    """The first line of an error's message (Java stack traces follow it), at most 300 chars."""
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__


def detail(err: FsError) -> str:
    """What pyarrow said, without the key prefix of a translated error."""
    return first_line(err.__cause__) if err.__cause__ is not None else str(err)


def translate_arrow_error(err: Exception, key: str) -> FsError:
    """The ``cloudfs.errors`` type for a pyarrow error on ``key``.

    pyarrow raises ``OSError`` subclasses carrying the errno that libhdfs (or the
    OS) reported; libhdfs uses 255 for Java exceptions it has no errno for
    (connection failures among them): those, and errors with no errno, are EIO.
    """
    if isinstance(err, FsError):
        return err
    if isinstance(err, OSError):
        code = err.errno
        cls = ERRNO_TYPES.get(code) if code is not None else None
        if cls is not None:
            result: FsError = cls(f"'{key}': {os.strerror(code or errno.EIO)}")
        elif code is not None and code in errno.errorcode:
            result = RemoteIOError(f"'{key}': {first_line(err)}", errno=code)
        else:
            result = RemoteIOError(f"'{key}': {first_line(err)}")
    elif isinstance(err, pa.ArrowNotImplementedError):
        result = NotSupported(f"'{key}': {first_line(err)}")
    elif isinstance(err, pa.ArrowInvalid):
        result = InvalidArgument(f"'{key}': {first_line(err)}")
    else:
        result = RemoteIOError(f"'{key}': {first_line(err)}")
    result.__cause__ = err
    return result


@contextmanager
def arrow_errors(key: str) -> Iterator[None]:
    """Raise pyarrow's errors in the block as ``translate_arrow_error`` says."""
    try:
        yield
    except FsError:
        raise
    except (OSError, pa.ArrowException) as err:
        raise translate_arrow_error(err, key) from err
