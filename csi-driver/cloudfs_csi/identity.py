"""CSI Identity service: the plugin's name, version and which services it serves."""

from __future__ import annotations

from google.protobuf.wrappers_pb2 import BoolValue

from cloudfs_csi import DRIVER_NAME, VERSION
from cloudfs_csi.csi.v1 import csi_pb2 as csi

Service = csi.PluginCapability.Service


class IdentityService:
    def __init__(self, *, controller: bool, name: str = DRIVER_NAME) -> None:
        self._controller = controller
        self._name = name

    def GetPluginInfo(self, req: csi.GetPluginInfoRequest) -> csi.GetPluginInfoResponse:
        return csi.GetPluginInfoResponse(name=self._name, vendor_version=VERSION)

    def GetPluginCapabilities(
        self, req: csi.GetPluginCapabilitiesRequest
    ) -> csi.GetPluginCapabilitiesResponse:
        caps = []
        if self._controller:
            caps.append(csi.PluginCapability(service=Service(type=Service.CONTROLLER_SERVICE)))
        return csi.GetPluginCapabilitiesResponse(capabilities=caps)

    def Probe(self, req: csi.ProbeRequest) -> csi.ProbeResponse:
        return csi.ProbeResponse(ready=BoolValue(value=True))
