"""GroupClient: the tree service's CacheGroupService (meta.proto): join or renew, leave, and
list a cache group. Each call is bounded by a deadline; failures are ``FsError``
(``channel.rpc_error``)."""

from __future__ import annotations

from cloudfs.meta.client.channel import ServiceClient
from cloudfs.tls import ClientTLS
from cloudfs.tokens import Token
from cloudfs.v1 import meta_pb2 as pb
from cloudfs.v1 import meta_pb2_grpc as rpc

CALL_TIMEOUT = 3.0  # seconds per call; a heartbeat must not wait past its TTL


class GroupClient(ServiceClient):
    """The CacheGroupService of one tree server."""

    def __init__(
        self,
        address: str,
        *,
        token: Token | None = None,
        timeout: float = CALL_TIMEOUT,
        tls: ClientTLS | None = None,
    ) -> None:
        super().__init__(address, rpc.CacheGroupServiceStub, token=token, timeout=timeout, tls=tls)

    def join(self, group: str, address: str, ttl: float) -> int:
        """Join or renew for ``ttl`` seconds; returns the expiry (ns, the server's clock)."""
        request = pb.GroupMemberRequest(group=group, address=address, ttl_ms=round(ttl * 1000))
        expires: int = self._call("JoinGroup", request).expires_ns
        return expires

    def leave(self, group: str, address: str) -> None:
        self._call("LeaveGroup", pb.GroupMemberRequest(group=group, address=address))

    def members(self, group: str) -> tuple[str, ...]:
        return tuple(self._call("ListGroup", pb.GroupRef(group=group)).members)
