"""Any ``pyarrow.fs`` filesystem as an ObjectStore: ``ArrowObjectStore``.

It serves a directory of a ``pyarrow.fs.FileSystem`` with the semantics of
``LocalObjectStore`` (what they share is in ``dirstore.py``): keys map 1:1 to
paths under the base directory, directories are real directories, in-flight
uploads are ``.cloudfs-tmp-*`` files in the target directory (never listed),
moved over the key once complete, so readers see the old object or the new one,
never a partial one. ``hdfs.HdfsObjectStore`` is this store over
``pyarrow.fs.HadoopFileSystem``; the conformance suite runs it over
``LocalFileSystem`` (in a ``SubTreeFileSystem``) and, when ``CLOUDFS_TEST_HDFS``
names a cluster, over HDFS.

What a pyarrow filesystem (HDFS above all) does not let this store hide:

- **Overwrites** are a delete and a rename (HDFS's rename never replaces a file,
  and libhdfs has no ``Rename.OVERWRITE``): between the two a reader of the key
  gets ENOENT, never a mix of old and new bytes.
- **ETags** are ``mtime-size``: HDFS has no content hash, libhdfs reports mtime in
  whole seconds, and pyarrow exposes no file id. A write through this store that
  would repeat the ETag of the object it replaces (same size, same second) is
  redone after the clock moves on, so the ETag always changes; an outside writer
  that rewrites a file with the same size within one second is not detected.
- **remove_dir** lists the directory and refuses a non-empty one, then deletes
  it; pyarrow only has a recursive delete, so an object created in that window
  (one RPC long) is deleted with it.
- ``head`` and other stats: pyarrow reports *any* failed stat on HDFS as "not
  found", so a "not found" is confirmed with an open that reports the real error
  (a namenode that cannot be reached is ``RemoteIOError``, never ENOENT).
- ``statfs`` answers large constants (pyarrow does not expose HDFS capacity).
- Symlinks cannot be told from their targets through pyarrow: a local
  ``SubTreeFileSystem`` follows them (HDFS has them disabled by default).
"""

from __future__ import annotations

import errno
import io
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from typing import Any, BinaryIO, cast

import pyarrow as pa
import pyarrow.fs as pafs

from cloudfs.errors import (
    IllegalName,
    InvalidArgument,
    IsADirectory,
    NotADirectory,
    NotEmpty,
    NotFound,
    RemoteIOError,
    UfsAccessDenied,
)
from cloudfs.types import ListPage, ObjectInfo
from cloudfs.ufs.arrow_errors import arrow_errors, detail, translate_arrow_error
from cloudfs.ufs.dirstore import (
    DIRECTORY,
    Described,
    DirectoryStore,
    key_parts,
    list_page,
    sorted_after,
    tmp_name,
)
from cloudfs.ufs.interface import check_dir_move, check_version

PiB = 1 << 50
COPY_CHUNK = 1 << 20

# A write that would repeat the replaced object's ETag is redone after these
# pauses (seconds); HDFS mtimes are whole seconds, so 2 s always suffices.
_SAME_ETAG_PAUSES = (0.02, 0.1, 0.4, 0.6, 1.0, 1.0)

# A listing continues from a snapshot for this long (seconds): pages 2..n of a
# large directory do not each list the whole directory again.
_SNAPSHOT_TTL = 30.0
_SNAPSHOTS_KEPT = 8


def _etag(info: Any) -> str:
    """(mtime_ns, size): all a directory tree offers; see the module docstring."""
    return f"{int(info.mtime_ns or 0):x}-{int(info.size or 0):x}"


def _object_info(key: str, info: Any) -> ObjectInfo:
    return ObjectInfo(
        key=key, size=int(info.size or 0), mtime_ns=int(info.mtime_ns or 0), etag=_etag(info)
    )


def _describe(key: str, info: Any) -> Described:
    """A listed ``FileInfo``: files and directories (a local filesystem's symlinks followed)."""
    if info.type == pafs.FileType.Directory:
        return DIRECTORY
    if info.type == pafs.FileType.File:
        return _object_info(key, info)
    return None


class ArrowReadStream(io.RawIOBase):
    """A pyarrow input file as a file object whose read errors are ``cloudfs.errors``."""

    def __init__(self, inner: Any, key: str) -> None:
        super().__init__()
        self._inner = inner
        self._key = key

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1, /) -> bytes:
        with arrow_errors(self._key):
            return bytes(self._inner.read(None if size is None or size < 0 else size))

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any, /) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            with suppress(OSError, pa.ArrowException):
                self._inner.close()
        super().close()


class ArrowObjectStore(DirectoryStore):
    """Objects as files under ``base`` of a ``pyarrow.fs.FileSystem``.

    ``base`` is a path of ``fs`` ("" for the root of a ``SubTreeFileSystem``,
    "/datasets" on HDFS); ``uri`` is what ``uri`` reports.
    """

    def __init__(self, fs: Any, base: str, uri: str) -> None:
        if base not in ("", "/"):
            base = base.rstrip("/")
        self._fs = fs
        self._base = base
        self._uri = uri
        # (prefix, token) -> (deadline, the (name, FileInfo) pairs after token)
        self._snapshots: dict[tuple[str, str], tuple[float, Sequence[tuple[str, Any]]]] = {}
        self._snapshots_lock = threading.Lock()

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def filesystem(self) -> Any:
        """The ``pyarrow.fs.FileSystem`` underneath (tests look behind the store)."""
        return self._fs

    def _path(self, key: str) -> str:
        """The path of ``key`` in the filesystem; refuses keys that would escape the base."""
        if not key_parts(key):  # [] for the root
            return self._base
        _require_utf8(key)
        return f"{self._base.rstrip('/')}/{key}" if self._base else key

    # -- helpers -------------------------------------------------------------

    def _stat(self, key: str, path: str) -> Any:
        """The ``FileInfo`` of ``path``; a "not found" is confirmed (HDFS hides errors)."""
        with arrow_errors(key):
            info = self._fs.get_file_info(path)
            if info.type != pafs.FileType.NotFound:
                return info
            try:
                self._fs.open_input_stream(path, compression=None).close()
            except (FileNotFoundError, NotADirectoryError):
                return info  # really absent
            except OSError as err:
                if err.errno is not None:
                    raise  # why the stat failed: unreachable namenode, permission, ...
            return self._fs.get_file_info(path)  # it appeared meanwhile

    def _kind(self, key: str, path: str) -> Any:
        """The ``FileType`` of ``path`` without confirming a "not found" (error paths)."""
        with arrow_errors(key):
            return self._fs.get_file_info(path).type

    def _children(self, key: str, path: str) -> list[Any] | None:
        """The ``FileInfo`` of each entry of directory ``path``; None if it is none."""
        selector = pafs.FileSelector(path, allow_not_found=False, recursive=False)
        try:
            return list(self._fs.get_file_info(selector))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, pa.ArrowException) as err:
            failure = err
        # pyarrow's HDFS reports a listed file with a plain IOError.
        if self._kind(key, path) == pafs.FileType.File:
            return None
        raise translate_arrow_error(failure, key) from failure

    def _ensure_parent(self, key: str) -> None:
        parent = key.rpartition("/")[0]
        if parent:
            with arrow_errors(parent):
                self._fs.create_dir(self._path(parent), recursive=True)

    def _open_input(self, key: str, path: str) -> Any:
        try:
            return self._fs.open_input_file(path)
        except (OSError, pa.ArrowException) as err:
            failure = err
        if self._kind(key, path) == pafs.FileType.Directory:
            raise IsADirectory(f"'{key}': is a directory") from failure
        raise translate_arrow_error(failure, key) from failure

    def _tmp_path(self, key: str) -> str:
        """A fresh temporary name in the directory of ``key``."""
        parent = self._path(key.rpartition("/")[0])
        name = tmp_name()
        if not parent:
            return name
        return parent + name if parent.endswith("/") else f"{parent}/{name}"

    # -- ObjectStore ---------------------------------------------------------

    def check(self) -> None:
        where = self._uri
        try:
            info = self._stat("", self._base)
        except UfsAccessDenied as err:
            raise UfsAccessDenied(f"access to {where} denied: {detail(err)}") from err
        except RemoteIOError as err:
            raise RemoteIOError(f"cannot reach {where}: {detail(err)}") from err
        if info.type == pafs.FileType.NotFound:
            raise NotFound(f"directory '{where}' does not exist")
        if info.type != pafs.FileType.Directory:
            raise NotADirectory(f"'{where}' is not a directory")

    def list_dir(self, prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        """Entries sorted by name (code point order), as ``LocalObjectStore`` lists them.

        ``token`` is the last name of the previous page. Pages after the first
        come from the first page's listing when it is recent (one RPC for a
        large directory on HDFS, not one per page).
        """
        path = self._path(prefix)
        entries = self._take_snapshot(prefix, token) if token is not None else None
        if entries is None:
            children = self._children(prefix, path)
            if children is None:
                return ListPage(objects=[], prefixes=[], next_token=None)
            entries = sorted_after(((e.base_name, e) for e in children), token)
        page, rest = list_page(prefix, entries, limit, _describe)
        if page.next_token is not None:
            self._keep_snapshot(prefix, page.next_token, rest)
        return page

    def _keep_snapshot(self, prefix: str, token: str, rest: Sequence[tuple[str, Any]]) -> None:
        now = time.monotonic()
        with self._snapshots_lock:
            for k, (deadline, _) in list(self._snapshots.items()):
                if deadline < now:
                    del self._snapshots[k]
            while len(self._snapshots) >= _SNAPSHOTS_KEPT:
                del self._snapshots[next(iter(self._snapshots))]
            self._snapshots[(prefix, token)] = (now + _SNAPSHOT_TTL, rest)

    def _take_snapshot(self, prefix: str, token: str) -> Sequence[tuple[str, Any]] | None:
        with self._snapshots_lock:
            found = self._snapshots.pop((prefix, token), None)
        if found is None or found[0] < time.monotonic():
            return None
        return found[1]

    def head(self, key: str) -> ObjectInfo:
        info = self._stat(key, self._path(key))
        if info.type != pafs.FileType.File:
            raise NotFound(f"'{key}': not an object")  # S3 answers 404 for a prefix too
        return _object_info(key, info)

    def get_range(self, key: str, offset: int, length: int, etag: str | None = None) -> bytes:
        if offset < 0 or length < 0:
            raise InvalidArgument(f"'{key}': negative range {offset}+{length}")
        f = self._open_input(key, self._path(key))
        with arrow_errors(key), f:
            size = f.size()
            length = min(length, size - offset)
            chunks: list[bytes] = []
            done = 0
            while done < length:
                chunk = f.read_at(length - done, offset + done)
                if not chunk:
                    break
                chunks.append(bytes(chunk))
                done += len(chunk)
        if etag is not None:  # after the bytes: a rewrite during the read shows up
            check_version(key, self.head(key).etag, etag)
        return b"".join(chunks)

    def get_stream(self, key: str, offset: int) -> BinaryIO:
        if offset < 0:
            raise InvalidArgument(f"'{key}': negative offset {offset}")
        f = self._open_input(key, self._path(key))
        try:
            with arrow_errors(key):
                f.seek(min(offset, f.size()))  # reading past the end fails in pyarrow
        except BaseException:
            with suppress(OSError, pa.ArrowException):
                f.close()
            raise
        return cast(BinaryIO, ArrowReadStream(f, key))

    def _write_atomic(self, key: str, fill: BinaryIO | bytes) -> ObjectInfo:
        """Write a temp file next to ``key`` and move it over ``key``."""
        path = self._path(key)
        tmp = self._tmp_path(key)
        with arrow_errors(key):
            old = self._fs.get_file_info(path)
        if old.type == pafs.FileType.Directory:
            raise IsADirectory(f"'{key}': is a directory")
        try:
            with arrow_errors(key):
                for pause in (*_SAME_ETAG_PAUSES, None):
                    self._upload(key, tmp, fill)
                    new = self._fs.get_file_info(tmp)
                    if old.type != pafs.FileType.File or _etag(new) != _etag(old):
                        break
                    if pause is None:
                        raise RemoteIOError(f"'{key}': the filesystem's clock does not advance")
                    time.sleep(pause)  # same size, same mtime: the ETag would not change
                    if not isinstance(fill, bytes):
                        fill.seek(0)
                self._fs.move(tmp, path)
        except BaseException:
            with suppress(OSError, pa.ArrowException):
                self._fs.delete_file(tmp)
            raise
        return _object_info(key, new)  # a rename keeps size and mtime

    def _upload(self, key: str, tmp: str, fill: BinaryIO | bytes) -> None:
        try:
            out = self._fs.open_output_stream(tmp, compression=None)
        except FileNotFoundError:  # HDFS creates parents itself; other filesystems do not
            self._ensure_parent(key)
            out = self._fs.open_output_stream(tmp, compression=None)
        with out:
            if isinstance(fill, bytes):
                out.write(fill)
            else:
                while chunk := fill.read(COPY_CHUNK):
                    out.write(chunk)

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            self._fs.delete_file(path)
            return
        except (OSError, pa.ArrowException) as err:
            failure = err
        kind = self._kind(key, path)
        if kind == pafs.FileType.Directory:
            raise IsADirectory(f"'{key}': is a directory") from failure
        # A missing file: ENOENT locally, EIO from libhdfs ("delete returned false").
        # Other errnos (libhdfs's 255 for an unreachable namenode) are real failures.
        missing = isinstance(failure, OSError) and failure.errno in (errno.ENOENT, errno.EIO)
        if kind == pafs.FileType.NotFound and missing:
            return
        raise translate_arrow_error(failure, key) from failure

    def validate_key(self, key: str, *, directory: bool = False) -> None:
        _require_utf8(key)

    def make_dir(self, key: str) -> None:
        path = self._path(key)
        if not path:
            return  # the root of a SubTreeFileSystem always exists
        with arrow_errors(key):
            self._fs.create_dir(path, recursive=True)

    def remove_dir(self, key: str) -> None:
        if not key:
            raise InvalidArgument("cannot remove the store root")
        path = self._path(key)
        children = self._children(key, path)
        if children is None:
            if self._stat(key, path).type == pafs.FileType.File:
                raise NotADirectory(f"'{key}': not a directory")
            return
        if children:
            raise NotEmpty(f"'{key}': directory not empty")
        try:
            with arrow_errors(key):
                self._fs.delete_dir(path)  # recursive in pyarrow: emptiness checked above
        except NotFound:
            return

    def rename(self, src: str, dst: str, etag: str | None = None) -> ObjectInfo:
        src_path, dst_path = self._path(src), self._path(dst)
        if etag is not None:
            check_version(src, self.head(src).etag, etag)
        if self._stat(src, src_path).type != pafs.FileType.File:
            raise NotFound(f"'{src}': not an object")
        # HDFS moves a file *into* a directory named by the destination.
        if self._kind(dst, dst_path) == pafs.FileType.Directory:
            raise IsADirectory(f"'{dst}': is a directory")
        self._ensure_parent(dst)
        with arrow_errors(src):
            self._fs.move(src_path, dst_path)  # pyarrow's HDFS: delete, then rename
        return self.head(dst)

    def rename_dir(self, src: str, dst: str) -> None:
        """Like ``os.rename``: ``dst`` must be missing or an empty directory."""
        check_dir_move(src, dst)
        src_path, dst_path = self._path(src), self._path(dst)
        kind = self._stat(src, src_path).type
        if kind == pafs.FileType.NotFound:
            raise NotFound(f"'{src}': no such directory")
        if kind != pafs.FileType.Directory:
            raise NotADirectory(f"'{src}': not a directory")
        dst_kind = self._kind(dst, dst_path)
        if dst_kind == pafs.FileType.File:
            raise NotADirectory(f"'{dst}': not a directory")
        if dst_kind == pafs.FileType.Directory:
            # HDFS would move src *into* dst: replace an empty dst the way rename(2) does.
            if self._children(dst, dst_path):
                raise NotEmpty(f"'{dst}': directory not empty")
            with arrow_errors(dst):
                self._fs.delete_dir(dst_path)
        self._ensure_parent(dst)
        with arrow_errors(src):
            self._fs.move(src_path, dst_path)

    def statfs(self) -> tuple[int, int]:
        return (PiB, PiB)


def _require_utf8(key: str) -> None:
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise IllegalName(f"{key!r} is not valid UTF-8, which HDFS names must be") from None
