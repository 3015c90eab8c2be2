"""CloudFile: what ``CloudFileSystem.open`` returns, for reading or for writing.

Reading (``rb``): the object version the tree named at open, read through the
block cache (``fetch``); fsspec's own read-ahead cache is off by default
(``cache_type="none"``), since every read is already served from cached blocks.

Writing (``wb``, ``xb``, ``ab``): bytes are staged in a local temporary file
and handed to ``commit`` when the file is closed, which uploads and commits
them as the mount's write-through does; nothing reaches the tree or the store
before that. A ``with`` block left by an exception, or ``discard()``, drops
the staged bytes instead, so a failed writer leaves the old file (or no file).
So does a writing file collected without ``close`` (fsspec's default would
commit whatever was written so far).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from types import TracebackType
from typing import Any

from fsspec.spec import AbstractBufferedFile

Fetch = Callable[[int, int], bytes]  # [start, end) of the version opened
Commit = Callable[[str], None]  # the staged file's path


class CloudFile(AbstractBufferedFile):  # type: ignore[misc]  # fsspec is untyped
    def __init__(
        self,
        fs: Any,
        path: str,
        mode: str,
        *,
        size: int | None = None,
        fetch: Fetch | None = None,
        commit: Commit | None = None,
        initial: Fetch | None = None,
        staging_dir: str | None = None,
        **kwargs: Any,
    ) -> None:
        """``fetch`` (read) or ``commit`` (write) and, for ``ab``, ``initial``: the
        bytes the file holds already."""
        self._fetch = fetch
        self._commit = commit
        self._initial = initial
        self._staging_dir = staging_dir
        self._staged: str | None = None
        self._staged_file: Any = None
        kwargs.setdefault("cache_type", "none")
        super().__init__(fs, path, mode, size=size, **kwargs)

    def _is_closed(self) -> bool:
        return bool(getattr(self, "_closed", True))

    def _fetch_range(self, start: int, end: int) -> bytes:
        assert self._fetch is not None
        return self._fetch(start, end)

    def _initiate_upload(self) -> None:
        fd, self._staged = tempfile.mkstemp(prefix="cloudfs-fsspec-", dir=self._staging_dir)
        self._staged_file = os.fdopen(fd, "wb")
        if self._initial is not None:  # append: the bytes already there come first
            self._staged_file.write(self._initial(0, 1 << 62))

    def _upload_chunk(self, final: bool = False) -> bool:
        self._staged_file.write(self.buffer.getbuffer())
        if final and self.autocommit:
            self.commit()
        return True

    def commit(self) -> None:
        """Upload the staged bytes as the file (close does it; or a transaction's end)."""
        assert self._commit is not None and self._staged is not None
        self._staged_file.close()
        try:
            self._commit(self._staged)
        finally:
            self._drop_staged()

    def discard(self) -> None:
        """Drop the staged bytes: the file stays as it was."""
        if self._staged_file is not None:
            self._staged_file.close()
        self._drop_staged()

    def _drop_staged(self) -> None:
        if self._staged is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._staged)
            self._staged = None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is not None and self.mode != "rb" and not self._is_closed():
            self.discard()  # nothing half-written becomes the file
            self.closed = True
            return
        self.close()

    def __del__(self) -> None:
        # io.IOBase.__del__ would close(), and so commit, a file its writer abandoned.
        if self.mode != "rb" and not self._is_closed():
            self.discard()
            self.closed = True
