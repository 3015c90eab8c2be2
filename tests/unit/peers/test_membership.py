"""A mount's changing cache group: ``PeerGroup.update``, never asking itself, the
heartbeat and watcher loops (over a fake client), and ``SingleStore``."""

from __future__ import annotations

import pytest

from cloudfs.cache.interface import BlockAsk
from cloudfs.errors import AccessDenied, RemoteIOError
from cloudfs.metrics import Metrics
from cloudfs.peers.client import PeerGroup
from cloudfs.peers.membership import GroupHeartbeat, GroupWatcher
from cloudfs.peers.stores import SingleStore
from testkit.memory_store import MemoryObjectStore

STORE = "file:///data"
ASK = BlockAsk("k", "etag", 100, 64 * 1024, 0, "cache-key", 100)


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_an_empty_group_sends_everything_to_the_ufs() -> None:
    metrics = Metrics()
    group = PeerGroup([], STORE, metrics)
    assert group.members == ()
    assert group.fetch([ASK]) == [None]
    assert sample(metrics, "cloudfs_peer_group_size") == 0


def test_update_swaps_members_and_their_gauges() -> None:
    metrics = Metrics()
    group = PeerGroup(["b:1"], STORE, metrics)
    try:
        assert group.update(["b:1", "a:1", " a:1 "])
        assert group.members == ("a:1", "b:1")
        assert not group.update(["a:1", "b:1"])  # nothing changed
        assert sample(metrics, "cloudfs_peer_group_size") == 2
        assert group.update(["a:1"])
        assert list(group.members) == ["a:1"]
        assert sample(metrics, "cloudfs_peer_member_up", member="a:1") == 1
        assert sample(metrics, "cloudfs_peer_member_up", member="b:1") is None
        assert group.update([])
        assert group.fetch([ASK]) == [None]
    finally:
        group.close()


def test_a_serving_mount_never_asks_itself() -> None:
    metrics = Metrics()
    group = PeerGroup(["127.0.0.1:1"], STORE, metrics, self_address="127.0.0.1:1")
    try:
        assert group.fetch([ASK]) == [None]
        assert sample(metrics, "cloudfs_peer_requests_total", member="127.0.0.1:1",
                      result="error") is None  # fmt: skip
    finally:
        group.close()


class FakeClient:
    def __init__(self) -> None:
        self.listed: tuple[str, ...] = ()
        self.down = False
        self.joins: list[tuple[str, str, float]] = []
        self.left: list[tuple[str, str]] = []

    def _check(self) -> None:
        if self.down:
            raise RemoteIOError("the tree service is unreachable")

    def join(self, group: str, address: str, ttl: float) -> int:
        self._check()
        self.joins.append((group, address, ttl))
        return 0

    def leave(self, group: str, address: str) -> None:
        self._check()
        self.left.append((group, address))

    def members(self, group: str) -> tuple[str, ...]:
        self._check()
        return self.listed


def test_the_watcher_applies_changes_and_keeps_the_last_group_while_the_service_is_away(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = FakeClient()
    group = PeerGroup([], STORE, Metrics())
    results: list[bool] = []
    watcher = GroupWatcher(client, "g", group.update, on_result=results.append)  # type: ignore[arg-type]
    try:
        client.listed = ("a:1", "b:1")
        assert watcher.tick()
        assert group.members == ("a:1", "b:1")
        client.down = True
        assert not watcher.tick()
        assert not watcher.tick()
        assert group.members == ("a:1", "b:1")  # not emptied: the workers may be fine
        client.down = False
        client.listed = ("b:1",)
        assert watcher.tick()
        assert list(group.members) == ["b:1"]
        assert results == [True, False, False, True]
        failures = [r for r in caplog.records if "failed, trying every" in r.getMessage()]
        assert len(failures) == 1  # logged once per change of state
    finally:
        group.close()


def test_the_heartbeat_joins_with_three_intervals_of_ttl_and_leaves_when_stopped() -> None:
    client = FakeClient()
    heartbeat = GroupHeartbeat(client, "g", "10.0.0.1:7080", interval=2.0)  # type: ignore[arg-type]
    assert heartbeat.tick()
    client.down = True
    assert not heartbeat.tick()  # never raises: a worker outlives the tree service
    client.down = False
    heartbeat.stop()
    assert client.joins == [("g", "10.0.0.1:7080", 6.0)]
    assert client.left == [("g", "10.0.0.1:7080")]


def test_a_single_store_serves_its_own_uri_only() -> None:
    store = MemoryObjectStore()
    single = SingleStore("file:///data/", store, "salt")
    opened = single.get("file:///data")
    assert opened.store is store and opened.salt == "salt"
    with pytest.raises(AccessDenied):
        single.get("file:///etc")
