"""Cache-group membership through the tree service (CacheGroupService of meta.proto).

* ``GroupClient`` (``meta/client/groups.py``) makes the three calls (join or
  renew, leave, list).
* ``GroupHeartbeat``: a member (``cloudfs cache serve --group``, a mount with
  ``--cache-group-serve``) joins every ``interval`` seconds with a TTL of
  ``TTL_HEARTBEATS`` intervals, so one lost heartbeat does not drop it, and
  leaves when stopped (SIGTERM), so mounts stop asking it at their next
  listing rather than after the TTL.
* ``GroupWatcher``: a mount lists the group every ``interval`` seconds and
  hands each new membership to ``PeerGroup.update``.

Both are ``Loop``s (``cloudfs/lib/loop.py``). Why threads rather than the
mount's trio loop: the worker has no loop, the calls are blocking gRPC ones,
and a thread per loop keeps both users alike.
Both loops outlive a tree service that is away: each call has a deadline,
a failure is logged once per change of state (not once per try), the
heartbeat keeps trying, and the watcher keeps the last membership it saw
(a worker that died meanwhile is left out by ``MemberHealth`` after one
failed call).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from cloudfs.errors import FsError
from cloudfs.lib.loop import Loop
from cloudfs.meta.client.groups import GroupClient

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 3.0
TTL_HEARTBEATS = 3  # a member is listed until 3 heartbeats were missed
REFRESH_SECONDS = 2.0  # how often a mount lists its group


class GroupHeartbeat(Loop):
    """Keep ``address`` listed in ``group`` while running; leave on ``stop``."""

    def __init__(
        self,
        client: GroupClient,
        group: str,
        address: str,
        *,
        interval: float = HEARTBEAT_SECONDS,
    ) -> None:
        super().__init__("group-heartbeat", interval, f"joining cache group {group} as {address}")
        self._client = client
        self._group = group
        self._address = address
        self._ttl = interval * TTL_HEARTBEATS

    def step(self) -> None:
        self._client.join(self._group, self._address, self._ttl)

    def stop(self) -> None:
        """Stop renewing and leave the group (bounded: one call's deadline)."""
        super().stop()
        try:
            self._client.leave(self._group, self._address)
        except FsError as exc:  # the TTL ends it anyway
            log.warning("leaving cache group %s: %s", self._group, exc)


class GroupWatcher(Loop):
    """Hand the live members of ``group`` to ``apply`` whenever they change."""

    def __init__(
        self,
        client: GroupClient,
        group: str,
        apply: Callable[[tuple[str, ...]], bool],
        *,
        interval: float = REFRESH_SECONDS,
        on_result: Callable[[bool], None] | None = None,
    ) -> None:
        """``apply``: ``PeerGroup.update`` (returns whether it changed);
        ``on_result``: told whether each listing worked (a metric)."""
        super().__init__("group-watcher", interval, f"listing cache group {group}")
        self._client = client
        self._group = group
        self._apply = apply
        self._on_result = on_result

    def step(self) -> None:
        members = self._client.members(self._group)
        if self._apply(members):
            log.info("cache group %s: %s", self._group, ", ".join(members) or "no members")

    def tick(self) -> bool:
        worked = super().tick()
        if self._on_result is not None:
            self._on_result(worked)
        return worked
