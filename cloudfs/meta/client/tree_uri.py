"""``grpc://HOST:PORT/VOLUME``: how mounts, the CSI driver and the CLI name a volume of the
tree service, and ``grpc://HOST:PORT`` the service itself."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import urlsplit

from cloudfs.errors import UsageError
from cloudfs.meta.wire.volumes import validate_volume_name

SCHEME = "grpc"


@dataclass(frozen=True, slots=True)
class TreeUri:
    address: str  # host:port
    volume: str

    @property
    def normalized(self) -> str:
        return f"{SCHEME}://{self.address}/{self.volume}"

    @property
    def cache_id(self) -> str:
        """Names the mount's cache directory, like ``ufs.factory.store_id``."""
        return hashlib.sha256(self.normalized.encode()).hexdigest()[:16]


def is_tree_uri(uri: str) -> bool:
    return uri.lower().startswith(f"{SCHEME}://")


def parse_tree_uri(uri: str) -> TreeUri:
    parts = urlsplit(uri)
    volume = parts.path.strip("/")
    if parts.scheme.lower() != SCHEME or not parts.hostname or not parts.port or not volume:
        raise UsageError(f"expected grpc://HOST:PORT/VOLUME, got '{uri}'")
    validate_volume_name(volume)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return TreeUri(f"{host}:{parts.port}", volume)


def parse_tree_address(uri: str, what: str) -> str:
    """``grpc://HOST:PORT`` (a tree service, no volume) -> ``HOST:PORT``; ``what``: the flag."""
    parts = urlsplit(uri)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme.lower() != SCHEME or not parts.hostname or not port or parts.path.strip("/"):
        raise UsageError(f"{what} wants grpc://HOST:PORT, not {uri!r}")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}"
