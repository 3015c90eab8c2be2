"""A volume as the tree service's clients and the service both see it: its record,
the rules for its name, and its protobuf form."""

from __future__ import annotations

from dataclasses import dataclass

from cloudfs.errors import InvalidArgument
from cloudfs.v1 import meta_pb2 as pb

MAX_NAME = 63


@dataclass(frozen=True, slots=True)
class VolumeSpec:
    name: str
    ufs_uri: str
    meta_ttl: float = 5.0
    default_uid: int = 0
    default_gid: int = 0
    file_mode: int = 0o644
    dir_mode: int = 0o755
    created_ns: int = 0
    tree_id: str = ""  # hex; the tree's keys start with TREE_PREFIX + bytes.fromhex(tree_id)


def validate_volume_name(name: str) -> None:
    ok = name and len(name) <= MAX_NAME and all(c.isalnum() or c in "-_." for c in name)
    if not ok or name.startswith("."):
        raise InvalidArgument(
            f"bad volume name {name!r}: 1-{MAX_NAME} letters, digits, '-', '_' or '.'"
        )


def volume_to_pb(v: VolumeSpec) -> pb.Volume:
    return pb.Volume(
        name=v.name, ufs_uri=v.ufs_uri, meta_ttl=v.meta_ttl, default_uid=v.default_uid,
        default_gid=v.default_gid, file_mode=v.file_mode, dir_mode=v.dir_mode,
        created_ns=v.created_ns,
    )  # fmt: skip


def volume_from_pb(m: pb.Volume, *, created: bool = False) -> VolumeSpec:
    """A volume from the wire; ``created``: it came from the server (keep its creation time)."""
    return VolumeSpec(
        name=m.name, ufs_uri=m.ufs_uri, meta_ttl=m.meta_ttl or 5.0, default_uid=m.default_uid,
        default_gid=m.default_gid, file_mode=m.file_mode or 0o644, dir_mode=m.dir_mode or 0o755,
        created_ns=m.created_ns if created else 0,
    )  # fmt: skip
