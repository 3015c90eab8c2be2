"""File-name rules and the mapping between tree names (bytes) and UFS keys (str).

Names travel as bytes (what the kernel gives us); UFS keys are str. The
conversion is UTF-8 with ``surrogateescape``, like ``os.fsdecode`` on Linux, so
any name round-trips; a store that cannot hold a non-UTF-8 key reports that as
its own error.
"""

from __future__ import annotations

from cloudfs.errors import InvalidArgument, NameTooLong
from cloudfs.types import NAME_MAX


def validate_name(name: bytes) -> None:
    """Raise the errno POSIX gives for a name a directory entry cannot have."""
    if not name or name in (b".", b"..") or b"/" in name or b"\0" in name:
        raise InvalidArgument(f"invalid file name {name!r}")
    if len(name) > NAME_MAX:
        raise NameTooLong(f"file name of {len(name)} bytes")


def is_valid_name(name: bytes) -> bool:
    """Whether a name found in a UFS listing can appear in the tree."""
    return (
        bool(name)
        and name not in (b".", b"..")
        and b"/" not in name
        and (b"\0" not in name and len(name) <= NAME_MAX)
    )


def name_to_str(name: bytes) -> str:
    return name.decode("utf-8", "surrogateescape")


def str_to_name(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def child_key(dir_key: str, name: bytes) -> str:
    """The UFS key of ``name`` inside the directory whose key is ``dir_key``."""
    return f"{dir_key}/{name_to_str(name)}" if dir_key else name_to_str(name)
