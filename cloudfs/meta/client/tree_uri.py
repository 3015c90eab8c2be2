"""``grpc://HOST:PORT/VOLUME``: how mounts, the CSI driver and the CLI name a volume of the
tree service, and ``grpc://HOST:PORT`` the service itself.

Several servers of one tree (stateless servers over etcd) are a comma list,
``grpc://h1:7070,h2:7070/VOLUME``: ``TreeUri.address`` keeps the list, and the
channel moves to a live server when the one it uses goes (``channel.py``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import urlsplit

from cloudfs.errors import UsageError
from cloudfs.meta.wire.volumes import validate_volume_name

SCHEME = "grpc"


@dataclass(frozen=True, slots=True)
class TreeUri:
    address: str  # host:port, or host:port,host:port... (several servers of one tree)
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
    address = _addresses(parts.netloc) if parts.scheme.lower() == SCHEME else None
    if address is None or not volume:
        raise UsageError(f"expected grpc://HOST:PORT/VOLUME, got '{uri}'")
    validate_volume_name(volume)
    return TreeUri(address, volume)


def parse_tree_address(uri: str, what: str) -> str:
    """``grpc://HOST:PORT`` (a tree service, no volume) -> ``HOST:PORT``; ``what``: the flag."""
    parts = urlsplit(uri)
    address = _addresses(parts.netloc) if parts.scheme.lower() == SCHEME else None
    if address is None or parts.path.strip("/"):
        raise UsageError(f"{what} wants grpc://HOST:PORT, not {uri!r}")
    return address


def _addresses(netloc: str) -> str | None:
    """``h1:7070,[::1]:7070`` checked, IPv6 hosts in brackets; None if an item is no
    HOST:PORT."""
    out = []
    for item in netloc.split(","):
        parts = urlsplit(f"//{item}")
        try:
            port = parts.port
        except ValueError:
            return None
        if not parts.hostname or not port or parts.username or parts.password:
            return None
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        out.append(f"{host}:{port}")
    return ",".join(out)
