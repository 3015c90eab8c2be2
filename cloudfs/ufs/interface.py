"""The ObjectStore protocol: what CloudFS needs from an under-filesystem (UFS).

Implementations: ``local.LocalObjectStore`` (``file:///dir``), ``s3.S3ObjectStore``
(``s3://bucket/prefix``), ``arrow.ArrowObjectStore`` (any ``pyarrow.fs``
filesystem) and its ``hdfs.HdfsObjectStore`` (``hdfs://namenode:8020/dir``), and
wrappers on ``forwarding.ForwardingObjectStore`` (``faults.FaultyObjectStore``,
``metered.MeteredObjectStore``). One conformance suite
(``tests/contract/test_object_store.py``) runs against every implementation.

Every method is blocking; the mount reaches a store only through
``trio.to_thread.run_sync`` with a ``CapacityLimiter``. Keys are relative to the
store root, "/"-separated, with no leading "/" ("train/0001.jpg"). A directory
key has no trailing "/" ("train"); "" is the root.

Errors (from ``cloudfs.errors``): ``NotFound`` when the key does not exist,
``AlreadyExists`` where noted, ``UfsAccessDenied`` for refused credentials, and
``RemoteIOError`` for anything else after the store's own bounded retries and
timeouts. No method may block forever.
"""

from __future__ import annotations

from typing import BinaryIO, Protocol

from cloudfs.errors import InvalidArgument, ObjectChanged
from cloudfs.types import ListPage, ObjectInfo


def check_version(key: str, have: str, want: str | None) -> None:
    """``ObjectChanged`` unless ``want`` is None or the object's ETag ``have`` (get_range)."""
    if want is not None and have != want:
        raise ObjectChanged(f"'{key}' is now version {have!r}, not {want!r}")


def check_dir_move(src: str, dst: str) -> None:
    """``InvalidArgument`` for a directory move (rename_dir) no store makes: of or onto
    the root, or of a directory into itself or below itself."""
    if not src or not dst:
        raise InvalidArgument("cannot rename the store root")
    if src == dst or dst.startswith(src + "/"):
        raise InvalidArgument(f"cannot move '{src}' into itself ('{dst}')")


def child_key(directory: str, name: str) -> str:
    """The key of entry ``name`` of directory key ``directory`` ("" is the root)."""
    return f"{directory}/{name}" if directory else name


class ObjectStore(Protocol):
    @property
    def uri(self) -> str:
        """The URI this store was opened with (``s3://bucket/prefix``)."""
        ...

    def check(self) -> None:
        """Verify that the root is reachable and the credentials work.

        Raises ``NotFound`` (bucket or directory missing), ``UfsAccessDenied``
        or ``RemoteIOError``. Called once by ``cloudfs mount`` before mounting.
        """
        ...

    def list_dir(self, prefix: str, token: str | None = None, limit: int = 1000) -> ListPage:
        """One page of the entries directly under directory ``prefix``.

        Sub-directories come from common prefixes and from zero-byte "dir/"
        marker objects (S3) or real directories (local); they are reported once
        each, in ``prefixes``. The marker of ``prefix`` itself is not listed.
        Pass the returned ``next_token`` to get the next page. A missing
        directory is an empty listing, not an error.
        """
        ...

    def validate_key(self, key: str, *, directory: bool = False) -> None:
        """Raise if this store cannot hold an object (or, ``directory``, a directory) ``key``.

        ``NameTooLong`` (ENAMETOOLONG) for a key over the store's length limit,
        ``IllegalName`` (EILSEQ) for one that is not UTF-8 where keys must be,
        ``InvalidArgument`` (EINVAL) for a name the store refuses otherwise.
        Local: the host path at most PATH_MAX - 1 (4095) bytes. S3: keys are
        UTF-8 and at most 1024 bytes, a directory's marker ``key/`` included.
        HDFS: ``DFSUtil.isValidName`` and the namenode's path limits (see
        ``validate_hdfs_path``). Pure: no request is made. The tree calls this
        for every name it adds (and every key a directory rename moves), so the
        caller gets the errno at create time, not EIO at close.
        """
        ...

    def head(self, key: str) -> ObjectInfo:
        """Size, mtime and ETag of one object. ``NotFound`` if absent."""
        ...

    def get_range(self, key: str, offset: int, length: int, etag: str | None = None) -> bytes:
        """Bytes [offset, offset+length) of an object; short at end of object.

        With ``etag``, bytes of that version only: ``ObjectChanged`` (ESTALE) if
        the object now has another (one conditional request where the store has
        them, S3's If-Match; else the bytes, then the version checked).
        """
        ...

    def get_stream(self, key: str, offset: int) -> BinaryIO:
        """A file-like object streaming the object from ``offset`` to its end.

        Sequential readers use this: one GET instead of one per block.
        The caller closes it.
        """
        ...

    def put_file(self, key: str, path: str, resume: str | None = None) -> ObjectInfo:
        """Upload the whole local file ``path`` as ``key`` (multipart when large).

        Atomic for readers: they see the old object or the new one, never a
        mix. Returns the new object's info (its ETag becomes the cache identity).
        ``resume``: a local path where a large upload keeps its progress, so a
        later call with the same path (after a crash) continues instead of
        starting over; stores with nothing to resume ignore it.
        """
        ...

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Upload a small object from memory (directory markers, tests)."""
        ...

    def delete(self, key: str) -> None:
        """Delete one object. Idempotent: deleting a missing key is not an error."""
        ...

    def make_dir(self, key: str) -> None:
        """Create directory ``key`` (S3: a zero-byte "key/" marker). Idempotent."""
        ...

    def remove_dir(self, key: str) -> None:
        """Remove the (empty) directory ``key`` and its marker. Idempotent."""
        ...

    def rename(self, src: str, dst: str, etag: str | None = None) -> ObjectInfo:
        """Move one object, replacing ``dst`` (S3: copy then delete).

        With ``etag``, only that version: ``ObjectChanged`` (ESTALE) and nothing
        moved if ``src`` now holds other bytes (an uploader moving what it put,
        when another file has since been put under the same name).
        """
        ...

    def rename_dir(self, src: str, dst: str) -> None:
        """Move directory ``src`` with everything under it to ``dst``.

        S3 has no directory rename: every object under "src/" (marker
        included) is copied to "dst/" and then deleted.
        """
        ...

    def statfs(self) -> tuple[int, int]:
        """(total bytes, free bytes) of the backing store; large constants for S3."""
        ...
