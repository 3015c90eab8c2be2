"""Request checks shared by the services: required fields and volume capabilities.

Every check here runs before any lookup, so a request missing a required
field gets INVALID_ARGUMENT whatever else is wrong with it.
"""

from __future__ import annotations

import os

from cloudfs.errors import UsageError
from cloudfs.mount.option_names import O_OPTIONS, o_items
from cloudfs_csi.cache_group import check_option
from cloudfs_csi.csi.v1 import csi_pb2 as csi
from cloudfs_csi.errors import InvalidArgument

Mode = csi.VolumeCapability.AccessMode
READ_ONLY_MODES = frozenset({Mode.SINGLE_NODE_READER_ONLY, Mode.MULTI_NODE_READER_ONLY})
SUPPORTED_MODES = frozenset(
    {
        Mode.SINGLE_NODE_WRITER,
        Mode.SINGLE_NODE_READER_ONLY,
        Mode.MULTI_NODE_READER_ONLY,
        Mode.MULTI_NODE_SINGLE_WRITER,
        Mode.MULTI_NODE_MULTI_WRITER,
        Mode.SINGLE_NODE_SINGLE_WRITER,
        Mode.SINGLE_NODE_MULTI_WRITER,
    }
)
FS_TYPES = frozenset({"", "cloudfs", "fuse.cloudfs"})
# Mount options the driver sets itself: a StorageClass may not move the cache,
# the log, the tokens or the TLS files, nor keep the mount process in the foreground.
DRIVER_OWNED_OPTIONS = frozenset(
    {"cache_dir", "log_file", "token_file", "cache_token_file", "foreground", "debug",
     "staging_dir", "allow_other", "tls_ca", "tls_cert", "tls_key"}
)  # fmt: skip
KNOWN_OPTIONS = O_OPTIONS
MAX_ID_BYTES = 128  # the spec's general size limit for ids
PATH_MAX = 4096  # Linux's limits: a longer path or name fails every system call
NAME_MAX = 255


def require(value: object, name: str) -> None:
    if not value:
        raise InvalidArgument(f"{name} is required")


def require_id(value: str, name: str) -> None:
    require(value, name)
    if len(value.encode()) > MAX_ID_BYTES:
        raise InvalidArgument(f"{name} is longer than {MAX_ID_BYTES} bytes")


def require_path(path: str, name: str) -> str:
    """A required absolute path, normalised (``..`` collapsed)."""
    require(path, name)
    if not os.path.isabs(path) or "\0" in path:
        raise InvalidArgument(f"{name} must be an absolute path")
    encoded = os.fsencode(path)
    if len(encoded) >= PATH_MAX or any(len(part) > NAME_MAX for part in encoded.split(b"/")):
        raise InvalidArgument(f"{name} is longer than a path or name may be")
    return os.path.normpath(path)


def check_capability(cap: csi.VolumeCapability, name: str = "volume_capability") -> None:
    """A capability CloudFS can serve: a mounted filesystem with a known access mode."""
    if not cap.HasField("access_mode"):
        raise InvalidArgument(f"{name}.access_mode is required")
    if cap.access_mode.mode not in SUPPORTED_MODES:
        raise InvalidArgument(f"{name}: access mode {cap.access_mode.mode} is not supported")
    access = cap.WhichOneof("access_type")
    if access is None:
        raise InvalidArgument(f"{name}: one of mount or block is required")
    if access == "block":
        raise InvalidArgument(f"{name}: CloudFS volumes are filesystems, not block devices")
    if cap.mount.fs_type not in FS_TYPES:
        raise InvalidArgument(f"{name}: fs_type must be empty or fuse.cloudfs")
    mount_options(list(cap.mount.mount_flags))


def require_capability(cap: csi.VolumeCapability, present: bool, name: str) -> None:
    if not present:
        raise InvalidArgument(f"{name} is required")
    check_capability(cap, name)


def mount_options(flags: list[str]) -> list[str]:
    """``mount_flags`` (a StorageClass's ``mountOptions``) as ``cloudfs mount -o`` items.

    Raises InvalidArgument naming the option, never its value (it may be secret).
    """
    try:
        out = o_items(flags, DRIVER_OWNED_OPTIONS)
    except UsageError as exc:
        raise InvalidArgument(str(exc).replace("by CloudFS itself", "by the driver")) from None
    for item in out:
        name, _, value = item.partition("=")
        check_option(name, value)
    return out


def is_read_only_mode(cap: csi.VolumeCapability) -> bool:
    return cap.access_mode.mode in READ_ONLY_MODES
