"""The tree service as the data-readiness check sees it: reports and volume names."""

from __future__ import annotations

from cloudfs.errors import NotFound
from cloudfs.meta.client.cache_reports import CacheReportClient
from cloudfs.meta.client.volumes import VolumeClient


class TreeServiceView:
    """``TreeView`` over one tree server's CacheReportService and VolumeService."""

    def __init__(self, reports: CacheReportClient, volumes: VolumeClient) -> None:
        self._reports = reports
        self._volumes = volumes

    def cached_bytes(self, volume: str) -> dict[str, int]:
        return self._reports.cached_bytes(volume)

    def volume_exists(self, volume: str) -> bool:
        try:
            self._volumes.get(volume)
        except NotFound:
            return False
        return True

    def close(self) -> None:
        self._reports.close()
        self._volumes.close()
