"""Gateway: what every operation of one gateway process shares (no module globals)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from cloudfs.gateway.volumes import Buckets
from cloudfs.metrics import GatewayMetrics


@dataclass
class Gateway:
    buckets: Buckets
    staging_dir: str  # staged PUT bodies and multipart parts (``uploads/``)
    block_size: int  # reads stream the object a cache block at a time
    region: str = "us-east-1"
    metrics: GatewayMetrics | None = None

    @property
    def uploads_dir(self) -> str:
        return os.path.join(self.staging_dir, "uploads")
