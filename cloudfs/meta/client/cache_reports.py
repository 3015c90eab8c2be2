"""CacheReportClient: the tree service's CacheReportService (meta.proto): a mount reports the
bytes its node caches of a volume; the scheduler extender and the Kueue check ask for them.
Each call is bounded by a deadline; failures are ``FsError``."""

from __future__ import annotations

from cloudfs.meta.client.channel import ServiceClient
from cloudfs.tls import ClientTLS
from cloudfs.tokens import Token
from cloudfs.v1 import meta_pb2 as pb
from cloudfs.v1 import meta_pb2_grpc as rpc

CALL_TIMEOUT = 3.0  # seconds per call


class CacheReportClient(ServiceClient):
    """The CacheReportService of one tree server."""

    def __init__(
        self,
        address: str,
        *,
        token: Token | None = None,
        timeout: float = CALL_TIMEOUT,
        tls: ClientTLS | None = None,
    ) -> None:
        super().__init__(address, rpc.CacheReportServiceStub, token=token, timeout=timeout, tls=tls)

    def report(self, volume: str, node: str, reporter: str, cached_bytes: int, ttl: float) -> int:
        """Replace ``reporter``'s last report; returns its expiry (ns, the server's clock)."""
        request = pb.CacheReport(
            volume=volume, node=node, reporter=reporter, cached_bytes=cached_bytes,
            ttl_ms=round(ttl * 1000),
        )  # fmt: skip
        expires: int = self._call("ReportCache", request).expires_ns
        return expires

    def cached_bytes(self, volume: str) -> dict[str, int]:
        """Node -> bytes of ``volume`` cached there (live reports only)."""
        reply = self._call("CachedBytes", pb.VolumeRef(volume=volume))
        return {n.node: n.cached_bytes for n in reply.nodes}
