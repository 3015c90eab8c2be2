"""What the stores over a directory tree share: ``local.LocalObjectStore`` and
``arrow.ArrowObjectStore`` (any ``pyarrow.fs`` filesystem, HDFS among them).

Keys map 1:1 to paths under the store's base directory, and directories are real
directories. A write goes to a temporary ``.cloudfs-tmp-*`` file in the target
directory and is moved over the key once complete, so readers see the old object
or the new one, never a partial one; listings never show those files. A listing
is sorted by name (code point order, which is S3's UTF-8 byte order), and its
token is the last name the previous page looked at.
"""

from __future__ import annotations

import errno
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import BinaryIO, Final, Literal, TypeVar

from cloudfs.errors import (
    AlreadyExists,
    CrossDevice,
    FsError,
    InvalidArgument,
    IsADirectory,
    NameTooLong,
    NoSpace,
    NotADirectory,
    NotEmpty,
    NotFound,
    ReadOnly,
    UfsAccessDenied,
)
from cloudfs.types import ListPage, ObjectInfo
from cloudfs.ufs.interface import child_key

Entry = TypeVar("Entry")

TMP_PREFIX = ".cloudfs-tmp-"  # in-flight uploads; never listed
TMP_NAME_LEN = len(TMP_PREFIX) + 16  # the length of a ``tmp_name()``

# The cloudfs error of each errno the filesystem underneath reports.
ERRNO_TYPES: dict[int, type[FsError]] = {
    errno.ENOENT: NotFound,
    errno.EACCES: UfsAccessDenied,
    errno.EPERM: UfsAccessDenied,
    errno.ENOSPC: NoSpace,
    errno.EDQUOT: NoSpace,
    errno.ENOTEMPTY: NotEmpty,
    errno.EEXIST: AlreadyExists,
    errno.ENOTDIR: NotADirectory,
    errno.EISDIR: IsADirectory,
    errno.ENAMETOOLONG: NameTooLong,
    errno.EROFS: ReadOnly,
    errno.EXDEV: CrossDevice,
}

DIRECTORY: Final = "directory"  # what a listing's ``describe`` answers for a sub-directory
Described = ObjectInfo | Literal["directory"] | None


def tmp_name() -> str:
    """A fresh name for a temporary file (``TMP_NAME_LEN`` characters)."""
    return TMP_PREFIX + secrets.token_hex(8)


def key_parts(key: str) -> list[str]:
    """The names of the path of ``key`` below the base ([] for the root, "").

    ``InvalidArgument`` for a key that would escape the base (a leading "/", a
    ".", ".." or empty name) or that holds a NUL.
    """
    if not key:
        return []
    parts = key.split("/")
    if key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise InvalidArgument(f"'{key}': not a valid key")
    if "\0" in key:
        raise InvalidArgument(f"'{key}': NUL in key")
    return parts


def sorted_after(
    entries: Iterable[tuple[str, Entry]], token: str | None
) -> list[tuple[str, Entry]]:
    """The (name, entry) pairs whose name sorts after ``token`` (all: None), sorted by name."""
    return sorted((e for e in entries if token is None or e[0] > token), key=lambda e: e[0])


def list_page(
    prefix: str,
    entries: Sequence[tuple[str, Entry]],
    limit: int,
    describe: Callable[[str, Entry], Described],
) -> tuple[ListPage, Sequence[tuple[str, Entry]]]:
    """One page of directory ``prefix``, and the entries left for the next one.

    ``entries``: ``sorted_after`` the token. ``describe(key, entry)`` answers the
    object's info, ``DIRECTORY``, or None for an entry that is not listed (a
    symlink, a special file, one removed meanwhile). At most ``limit`` entries
    are listed (temporary files are skipped and not counted); the next token is
    the name of the last entry looked at, when any are left.
    """
    limit = max(1, limit)
    objects: list[ObjectInfo] = []
    prefixes: list[str] = []
    last: str | None = None
    count = 0
    for index, (name, entry) in enumerate(entries):
        if count == limit:
            return ListPage(objects=objects, prefixes=prefixes, next_token=last), entries[index:]
        last = name
        if name.startswith(TMP_PREFIX):
            continue
        key = child_key(prefix, name)
        found = describe(key, entry)
        if found is None:
            continue
        if isinstance(found, ObjectInfo):
            objects.append(found)
        else:
            prefixes.append(key)
        count += 1
    return ListPage(objects=objects, prefixes=prefixes, next_token=None), ()


class DirectoryStore(ABC):
    """The uploads of a store over a directory tree, on top of its ``_write_atomic``."""

    @abstractmethod
    def _write_atomic(self, key: str, fill: BinaryIO | bytes) -> ObjectInfo:
        """Write ``fill`` to a temporary file beside ``key`` (not ""), then move it over ``key``."""

    def _put(self, key: str, fill: BinaryIO | bytes) -> ObjectInfo:
        if not key:
            raise InvalidArgument("cannot write the store root")
        return self._write_atomic(key, fill)

    def put_file(self, key: str, path: str, resume: str | None = None) -> ObjectInfo:
        """``resume`` is ignored: an interrupted upload is only a temporary file."""
        try:
            src = open(path, "rb")  # noqa: SIM115 - closed below, before errors are mapped
        except OSError as err:
            raise InvalidArgument(f"cannot read upload source {path}: {err.strerror}") from err
        with src:
            return self._put(key, src)

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        return self._put(key, bytes(data))
