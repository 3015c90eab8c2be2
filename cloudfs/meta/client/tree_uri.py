"""Reaching the tree service: ``grpc://HOST:PORT/VOLUME`` URIs and the volume admin client."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import urlsplit

from cloudfs.errors import UsageError
from cloudfs.meta.client.grpc_meta import ServiceClient
from cloudfs.meta.service.server import volume_from_pb, volume_to_pb
from cloudfs.meta.service.volumes import VolumeSpec, validate_volume_name
from cloudfs.tls import ClientTLS
from cloudfs.tokens import Token
from cloudfs.v1 import meta_pb2 as pb
from cloudfs.v1 import meta_pb2_grpc as rpc

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


class VolumeClient(ServiceClient):
    """``cloudfs volume ...`` and mounts: the VolumeService of one tree server."""

    def __init__(
        self,
        address: str,
        *,
        token: Token | None = None,
        timeout: float = 30.0,
        tls: ClientTLS | None = None,
    ) -> None:
        super().__init__(address, rpc.VolumeServiceStub, token=token, timeout=timeout, tls=tls)

    def create(self, spec: VolumeSpec) -> VolumeSpec:
        return volume_from_pb(self._call("CreateVolume", volume_to_pb(spec)), created=True)

    def get(self, name: str) -> VolumeSpec:
        return volume_from_pb(self._call("GetVolume", pb.VolumeRef(volume=name)), created=True)

    def list(self) -> list[VolumeSpec]:
        reply = self._call("ListVolumes", pb.Empty())
        return [volume_from_pb(v, created=True) for v in reply.volumes]

    def delete(self, name: str) -> None:
        self._call("DeleteVolume", pb.VolumeRef(volume=name))
