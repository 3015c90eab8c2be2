"""StorageClass parameters of dynamically provisioned volumes.

    server    HOST:PORT of the directory-tree service (required)
    ufsUri    where the volumes' data lives: s3://bucket/prefix, hdfs://..., file:///dir (required)
    subPath   "true" (default): each volume gets its own UFS_URI/<volume name>;
              "false": every volume of the class is a tree over ufsUri itself
    metaTtl, uid, gid, fileMode, dirMode: the tree-service volume's listing TTL and
              the owner and modes of UFS objects that have none in the tree
    cacheGroup, cachePeers: the volumes' cache group (``cache_group.py``), passed to
              the nodes in the volume context

Keys under ``csi.storage.k8s.io/`` (the provisioner's own) are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cloudfs.errors import FsError, UsageError
from cloudfs.k8s.csi_names import CONTEXT_GROUP, CONTEXT_PEERS
from cloudfs.meta.client.tree_uri import parse_tree_uri
from cloudfs.sizes import parse_mode, parse_seconds
from cloudfs.ufs.factory import validate_uri
from cloudfs_csi import cache_group
from cloudfs_csi.errors import InvalidArgument

PROVISIONER_PREFIX = "csi.storage.k8s.io/"
KNOWN = frozenset(
    {"server", "ufsUri", "subPath", "metaTtl", "uid", "gid", "fileMode", "dirMode",
     *cache_group.CONTEXT_KEYS}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ProvisionParams:
    server: str
    ufs_uri: str
    sub_path: bool = True
    meta_ttl: float = 5.0
    uid: int = 0
    gid: int = 0
    file_mode: int = 0o644
    dir_mode: int = 0o755
    cache: cache_group.CacheGroup = field(default_factory=cache_group.CacheGroup)

    def context(self) -> dict[str, str]:
        """What the nodes need beyond the volume's URI: its cache group."""
        out = {}
        if self.cache.group:
            out[CONTEXT_GROUP] = self.cache.group
        if self.cache.peers:
            out[CONTEXT_PEERS] = ",".join(self.cache.peers)
        return out

    def ufs_for(self, volume_name: str) -> str:
        return f"{self.ufs_uri.rstrip('/')}/{volume_name}" if self.sub_path else self.ufs_uri


def parse(parameters: dict[str, str]) -> ProvisionParams:
    params = {k: v for k, v in parameters.items() if not k.startswith(PROVISIONER_PREFIX)}
    unknown = sorted(set(params) - KNOWN)
    if unknown:
        raise InvalidArgument(f"unknown StorageClass parameters {unknown}; known: {sorted(KNOWN)}")
    for key in ("server", "ufsUri"):
        if not params.get(key):
            raise InvalidArgument(f"StorageClass parameter {key!r} is required")
    cache = cache_group.from_parameters(params)
    try:
        parse_tree_uri(f"grpc://{params['server']}/probe")
        validate_uri(params["ufsUri"])
        sub_path = params.get("subPath", "true").lower()
        if sub_path not in ("true", "false"):
            raise UsageError("subPath must be true or false")
        return ProvisionParams(
            server=params["server"],
            ufs_uri=params["ufsUri"],
            sub_path=sub_path == "true",
            meta_ttl=parse_seconds(params.get("metaTtl", "5")),
            uid=int(params.get("uid", "0")),
            gid=int(params.get("gid", "0")),
            file_mode=parse_mode(params.get("fileMode", "0644")),
            dir_mode=parse_mode(params.get("dirMode", "0755")),
            cache=cache,
        )
    except (UsageError, FsError, ValueError) as exc:
        raise InvalidArgument(f"bad StorageClass parameters: {exc}") from None
