"""VolumeClient: the tree service's volume admin calls (create, get, list, delete)."""

from __future__ import annotations

from cloudfs.meta.client.channel import ServiceClient
from cloudfs.meta.wire.volumes import VolumeSpec, volume_from_pb, volume_to_pb
from cloudfs.tls import ClientTLS
from cloudfs.tokens import Token
from cloudfs.v1 import meta_pb2 as pb
from cloudfs.v1 import meta_pb2_grpc as rpc


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
