"""``LocalObjectStore``: a local directory (``file:///dir``) as an ObjectStore.

Used for tests, for single-node setups, and as the reference the S3 store is
compared against in the conformance suite. Keys map 1:1 to paths under the root;
directories are real directories (what it shares with the pyarrow store is in
``dirstore.py``). Writes go to a temporary file in the target directory, are
fsynced, then ``os.replace``d over the key, so readers see the old or the new
object, never a mix. The ETag is derived from (mtime_ns, size, inode): any
rewrite through this store changes it.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import BinaryIO

from cloudfs.errors import (
    FsError,
    InvalidArgument,
    NameTooLong,
    NotADirectory,
    NotFound,
    RemoteIOError,
    UfsAccessDenied,
)
from cloudfs.types import ListPage, ObjectInfo
from cloudfs.ufs.dirstore import (
    DIRECTORY,
    ERRNO_TYPES,
    TMP_NAME_LEN,
    Described,
    DirectoryStore,
    key_parts,
    list_page,
    sorted_after,
    tmp_name,
)
from cloudfs.ufs.interface import check_dir_move, check_version


def translate_os_error(err: OSError, key: str) -> FsError:
    """The ``cloudfs.errors`` type for an ``OSError`` on ``key``; unknown errnos keep theirs."""
    code = err.errno or errno.EIO
    message = f"'{key}': {err.strerror or os.strerror(code)}"
    cls = ERRNO_TYPES.get(code)
    result = cls(message) if cls is not None else RemoteIOError(message, errno=code)
    result.__cause__ = err
    return result


@contextmanager
def _os_errors(key: str) -> Iterator[None]:
    try:
        yield
    except OSError as err:
        raise translate_os_error(err, key) from err


def _etag(st: os.stat_result) -> str:
    """(mtime_ns, size, inode): every write through this store makes a new inode, so
    a same-size rewrite within one coarse kernel timestamp tick still changes it."""
    return f"{st.st_mtime_ns:x}-{st.st_size:x}-{st.st_ino:x}"


def _info(key: str, st: os.stat_result) -> ObjectInfo:
    return ObjectInfo(key=key, size=st.st_size, mtime_ns=st.st_mtime_ns, etag=_etag(st))


def _describe(key: str, entry: os.DirEntry[str]) -> Described:
    """A listed entry: files and directories; symlinks and special files are not listed."""
    try:
        if entry.is_symlink():
            return None
        if entry.is_dir(follow_symlinks=False):
            return DIRECTORY
        if entry.is_file(follow_symlinks=False):
            return _info(key, entry.stat(follow_symlinks=False))
    except FileNotFoundError:
        pass  # removed while we listed
    return None


def _fsync_dir(path: str) -> None:
    """Make a rename/create in ``path`` durable; best effort on filesystems without it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


LOCAL_PATH_MAX = 4095  # Linux's PATH_MAX (4096) less the terminating NUL


class LocalObjectStore(DirectoryStore):
    """Objects as files under ``root``; the conformance reference for other stores."""

    def __init__(self, root: str) -> None:
        if not os.path.isabs(root):
            raise InvalidArgument(f"local store root must be absolute: '{root}'")
        self._root = os.path.normpath(root)

    @property
    def uri(self) -> str:
        return f"file://{self._root}"

    @property
    def root(self) -> str:
        return self._root

    def _path(self, key: str) -> str:
        """The path of ``key``; refuses keys that would escape the root."""
        return os.path.join(self._root, *key_parts(key))

    # -- ObjectStore ---------------------------------------------------------

    def check(self) -> None:
        try:
            st = os.stat(self._root)
        except FileNotFoundError as err:
            raise NotFound(f"directory '{self._root}' does not exist") from err
        except OSError as err:
            raise translate_os_error(err, self._root) from err
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectory(f"'{self._root}' is not a directory")
        if not os.access(self._root, os.R_OK | os.X_OK):
            raise UfsAccessDenied(f"directory '{self._root}' is not readable")

    def list_dir(self, prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        """Entries sorted by name (code point order = S3's UTF-8 byte order).

        ``token`` is the last name of the previous page. Symlinks and special
        files are skipped: only the tree can represent them.
        """
        path = self._path(prefix)
        try:
            with os.scandir(path) as it:
                entries = sorted_after(((e.name, e) for e in it), token)
        except (FileNotFoundError, NotADirectoryError):
            return ListPage(objects=[], prefixes=[], next_token=None)
        except OSError as err:
            raise translate_os_error(err, prefix) from err
        return list_page(prefix, entries, limit, _describe)[0]

    def head(self, key: str) -> ObjectInfo:
        with _os_errors(key):
            st = os.stat(self._path(key))
        if not stat.S_ISREG(st.st_mode):
            raise NotFound(f"'{key}': not an object")  # S3 answers 404 for a prefix too
        return _info(key, st)

    def get_range(self, key: str, offset: int, length: int, etag: str | None = None) -> bytes:
        if offset < 0 or length < 0:
            raise InvalidArgument(f"'{key}': negative range {offset}+{length}")
        with _os_errors(key):
            fd = os.open(self._path(key), os.O_RDONLY)
            try:
                if etag is not None:  # the file this fd reads, not whatever the path is now
                    check_version(key, _etag(os.fstat(fd)), etag)
                chunks: list[bytes] = []
                done = 0
                while done < length:
                    chunk = os.pread(fd, length - done, offset + done)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    done += len(chunk)
            finally:
                os.close(fd)
        return b"".join(chunks)

    def get_stream(self, key: str, offset: int) -> BinaryIO:
        if offset < 0:
            raise InvalidArgument(f"'{key}': negative offset {offset}")
        with _os_errors(key):
            f = open(self._path(key), "rb")  # noqa: SIM115 - the caller closes it
            try:
                f.seek(offset)
            except BaseException:
                f.close()
                raise
        return f

    def _write_atomic(self, key: str, fill: BinaryIO | bytes) -> ObjectInfo:
        """Write a temp file next to ``key``, fsync it, and rename it over ``key``."""
        path = self._path(key)
        parent = os.path.dirname(path)
        with _os_errors(key):
            os.makedirs(parent, exist_ok=True)
            # Not mkstemp: its 0600 mode would stick to the object; this honours umask.
            tmp = os.path.join(parent, tmp_name())
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            try:
                with os.fdopen(fd, "wb") as out:
                    if isinstance(fill, bytes):
                        out.write(fill)
                    else:
                        shutil.copyfileobj(fill, out, 1 << 20)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, path)
            except BaseException:
                with suppress(OSError):
                    os.unlink(tmp)
                raise
            _fsync_dir(parent)
            return _info(key, os.stat(path))

    def delete(self, key: str) -> None:
        try:
            os.unlink(self._path(key))
        except FileNotFoundError:
            return
        except OSError as err:
            raise translate_os_error(err, key) from err

    def validate_key(self, key: str, *, directory: bool = False) -> None:
        """Any name the tree accepts, in a host path of at most PATH_MAX - 1 bytes.

        A file's bytes arrive under a temporary name beside it, so a short name
        is counted at that name's length.
        """
        path = os.fsencode(self._path(key))
        name = os.path.basename(path)
        length = len(path) if directory else len(path) - len(name) + max(len(name), TMP_NAME_LEN)
        if length > LOCAL_PATH_MAX:
            raise NameTooLong(f"host paths are at most {LOCAL_PATH_MAX} bytes, not {length}")

    def make_dir(self, key: str) -> None:
        path = self._path(key)
        with _os_errors(key):
            os.makedirs(path, exist_ok=True)

    def remove_dir(self, key: str) -> None:
        if not key:
            raise InvalidArgument("cannot remove the store root")
        try:
            os.rmdir(self._path(key))
        except FileNotFoundError:
            return
        except OSError as err:
            raise translate_os_error(err, key) from err

    def rename(self, src: str, dst: str, etag: str | None = None) -> ObjectInfo:
        src_path, dst_path = self._path(src), self._path(dst)
        if etag is not None:
            check_version(src, self.head(src).etag, etag)
        with _os_errors(src):
            if not stat.S_ISREG(os.stat(src_path).st_mode):
                raise NotFound(f"'{src}': not an object")
            os.makedirs(os.path.dirname(dst_path), exist_ok=True)
            os.replace(src_path, dst_path)
            _fsync_dir(os.path.dirname(dst_path))
        return self.head(dst)

    def rename_dir(self, src: str, dst: str) -> None:
        """``os.rename``: atomic; ``dst`` must be missing or an empty directory."""
        check_dir_move(src, dst)
        src_path, dst_path = self._path(src), self._path(dst)
        with _os_errors(src):
            if not stat.S_ISDIR(os.stat(src_path).st_mode):
                raise NotADirectory(f"'{src}': not a directory")
            os.makedirs(os.path.dirname(dst_path), exist_ok=True)
            os.rename(src_path, dst_path)

    def statfs(self) -> tuple[int, int]:
        with _os_errors(""):
            st = os.statvfs(self._root)
        return (st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)
