"""The one translation from CloudFS's errors to what fsspec callers expect.

Inside, every layer raises ``cloudfs.errors.FsError`` carrying an errno; fsspec
users (pandas, pyarrow, a DataLoader) catch the builtin ``OSError`` subclasses
(``FileNotFoundError``, ``FileExistsError``, ``IsADirectoryError``,
``NotADirectoryError``, ``PermissionError``). ``OSError(errno, ...)`` already
picks the subclass of an errno, so the mapping is the errno itself, kept with
the message, the path and the original error as ``__cause__``.
"""

from __future__ import annotations

import errno as errnos
from collections.abc import Iterator
from contextlib import contextmanager

from cloudfs.errors import FsError, UsageError


def os_error(code: int, path: str, message: str = "") -> OSError:
    """``OSError`` of ``code`` (its builtin subclass) about ``path``."""
    return OSError(code, message or errnos.errorcode.get(code, "error"), path)


@contextmanager
def translated(path: str) -> Iterator[None]:
    """Re-raise an ``FsError`` (and a ``UsageError``: a bad volume name) as an ``OSError``."""
    try:
        yield
    except FsError as e:
        raise os_error(e.errno, path, str(e)) from e
    except UsageError as e:
        raise os_error(errnos.EINVAL, path, str(e)) from e
