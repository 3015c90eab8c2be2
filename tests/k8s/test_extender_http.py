"""The extender as kube-scheduler meets it: recorded ``ExtenderArgs`` bodies POSTed to a
running ``cloudfs scheduler extender`` over HTTP, the answers checked field by field
against the Go types (``ExtenderFilterResult``, ``HostPriorityList``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cloudfs.meta.client.cache_reports import CacheReportClient
from testkit.tree_server import TreeServer
from tests.k8s.conftest import post, recorded, running_extender

NAMES = ["node-a", "node-b", "node-c"]
FILTER_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}


@pytest.fixture(scope="module")
def reported(tree_server: TreeServer) -> None:
    """Mounts on node-a hold 800 bytes of imagenet (two mounts), node-b 300, node-c none."""
    client = CacheReportClient(tree_server.address)
    try:
        client.report("imagenet", "node-a", "mount-1", 500, ttl=300)
        client.report("imagenet", "node-a", "mount-2", 300, ttl=300)
        client.report("imagenet", "node-b", "mount-3", 300, ttl=300)
        client.report("other", "node-c", "mount-4", 10_000, ttl=300)
    finally:
        client.close()


@pytest.fixture(scope="module")
def extender(tree_server: TreeServer, reported: None) -> Iterator[str]:
    with running_extender(tree_server.address, "--no-kube-api") as url:
        yield url


def test_filter_node_cache_capable_passes_names_back(extender: str) -> None:
    status, answer = post(
        extender + "/filter", json.dumps(recorded("filter_node_names.json")).encode()
    )
    assert status == 200
    assert set(answer) == FILTER_KEYS
    assert answer["NodeNames"] == NAMES
    assert answer["Nodes"] is None
    assert answer["FailedNodes"] == {}
    assert answer["FailedAndUnresolvableNodes"] == {}
    assert answer["Error"] == ""


def test_prioritize_node_cache_capable_scores_the_cached_node_highest(extender: str) -> None:
    status, answer = post(
        extender + "/prioritize", json.dumps(recorded("prioritize_node_names.json")).encode()
    )
    assert status == 200
    assert answer == [
        {"Host": "node-a", "Score": 10},  # 800 of 800 bytes
        {"Host": "node-b", "Score": 4},  # round(10 * 300 / 800)
        {"Host": "node-c", "Score": 0},  # another volume's bytes do not count
    ]


def test_prioritize_with_whole_nodes(extender: str) -> None:
    status, answer = post(
        extender + "/prioritize", json.dumps(recorded("prioritize_nodes.json")).encode()
    )
    assert status == 200
    assert [(h["Host"], h["Score"]) for h in answer] == [
        ("node-a", 10),
        ("node-b", 4),
        ("node-c", 0),
    ]
    assert all(set(h) == {"Host", "Score"} and isinstance(h["Score"], int) for h in answer)


def test_filter_with_whole_nodes_returns_node_objects_and_failed_nodes(
    tree_server: TreeServer, reported: None
) -> None:
    body = recorded("filter_nodes.json")
    with running_extender(
        tree_server.address, "--no-kube-api", "--node-label", "cloudfs.io/node-plugin=true",
        "--prefix", "/cloudfs",
    ) as url:  # fmt: skip
        status, answer = post(url + "/cloudfs/filter", json.dumps(body).encode())
        missing, _ = post(url + "/filter", json.dumps(body).encode())
    assert status == 200
    assert set(answer) == FILTER_KEYS
    assert answer["NodeNames"] is None
    assert answer["Nodes"]["items"] == body["Nodes"]["items"][:2]  # untouched Node objects
    assert list(answer["FailedNodes"]) == ["node-c"]
    assert "cloudfs.io/node-plugin=true" in answer["FailedNodes"]["node-c"]
    assert answer["FailedAndUnresolvableNodes"] == {}
    assert answer["Error"] == ""
    assert missing == 404  # the verbs live under the prefix only


def test_prioritize_follows_the_pvc_to_its_csi_volume(
    tree_server: TreeServer, reported: None, fake_kube_api: str
) -> None:
    body = json.dumps(recorded("prioritize_pvc.json")).encode()
    with running_extender(tree_server.address, "--kube-api", fake_kube_api) as url:
        status, answer = post(url + "/prioritize", body)
    assert status == 200
    assert answer == [
        {"Host": "node-a", "Score": 10},
        {"Host": "node-b", "Score": 4},
        {"Host": "node-c", "Score": 0},
    ]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "bad ExtenderArgs"),
        (b'{"Nodes": null, "NodeNames": ["node-a"]}', "Pod"),
        (b'{"Pod": {}, "Nodes": null, "NodeNames": null}', "neither"),
        (b'{"Pod": {}, "NodeNames": [1]}', "NodeNames"),
    ],
)
def test_a_bad_body_is_400_with_error(extender: str, body: bytes, says: str) -> None:
    for verb in ("filter", "prioritize"):
        status, answer = post(f"{extender}/{verb}", body)
        assert status == 400
        assert says in answer["Error"]
        assert answer["NodeNames"] is None and answer["Nodes"] is None


def test_an_unreachable_tree_service_scores_every_node_0(reported: None) -> None:
    body = json.dumps(recorded("prioritize_node_names.json")).encode()
    with running_extender("127.0.0.1:1", "--no-kube-api") as url:
        status, answer = post(url + "/prioritize", body)
        filtered, passed = post(url + "/filter", body)
    assert status == 200
    assert answer == [{"Host": n, "Score": 0} for n in NAMES]
    assert filtered == 200 and passed["NodeNames"] == NAMES
