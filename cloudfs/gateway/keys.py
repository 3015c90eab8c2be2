"""Object keys as paths of the volume's tree, and back.

S3 keys are UTF-8 strings of at most 1024 bytes; the tree holds POSIX names.
Key ``a/b/c.txt`` is file ``c.txt`` in directories ``a/b`` (made on PUT as an
object store's implicit parents); a key ending in ``/`` names the directory
(a "directory marker", as s3a and the console make them). What a POSIX tree
cannot hold (an empty segment as in ``a//b``, ``.`` or ``..``, a NUL, a
segment over 255 bytes) is refused with a 400 saying why, before anything is
touched.
"""

from __future__ import annotations

from dataclasses import dataclass

from cloudfs.client.volume import Parts
from cloudfs.gateway.errors import S3Error
from cloudfs.types import NAME_MAX

MAX_KEY_BYTES = 1024


@dataclass(frozen=True, slots=True)
class ObjectPath:
    """A key of a bucket as the tree sees it."""

    key: str
    parts: Parts  # the names below the volume's root
    is_dir_marker: bool  # the key ends in "/": the directory itself


def parse_key(key: str, *, bucket: str = "") -> ObjectPath:
    """The tree path of ``key``; ``S3Error`` (400) for a key the tree cannot hold."""
    resource = f"/{bucket}/{key}"
    raw = key.encode("utf-8", "surrogatepass")
    if not raw:
        raise S3Error("InvalidArgument", 400, "the object key is empty", resource=resource)
    if len(raw) > MAX_KEY_BYTES:
        raise S3Error(
            "KeyTooLongError", 400, "Your key is too long (S3 allows 1024 bytes)", resource=resource
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise S3Error(
            "InvalidArgument", 400, "the object key is not valid UTF-8", resource=resource
        ) from None
    if b"\0" in raw:
        raise S3Error(
            "InvalidArgument", 400, "a key with a NUL byte cannot name a file", resource=resource
        )
    is_marker = raw.endswith(b"/")
    segments = raw[:-1].split(b"/") if is_marker else raw.split(b"/")
    for segment in segments:
        if segment in (b"", b".", b".."):
            shown = segment.decode() or "an empty segment"
            raise S3Error(
                "InvalidArgument",
                400,
                f"the key has {shown!s} between slashes, which a POSIX tree cannot hold"
                " (CloudFS keys are paths: no '//', '.' or '..' segments, no leading '/')",
                resource=resource,
            )
        if len(segment) > NAME_MAX:
            raise S3Error(
                "KeyTooLongError",
                400,
                f"a segment of the key is longer than {NAME_MAX} bytes, the longest file name",
                resource=resource,
            )
    return ObjectPath(key, tuple(segments), is_marker)


def key_of(parts: Parts, *, directory: bool = False) -> str:
    """The key of a tree path (``directory``: its marker, ending in ``/``)."""
    text = b"/".join(parts).decode("utf-8")
    return text + "/" if directory and text else text
