"""End to end: a real FUSE mount of a tree-service volume on "node-a" reads a dataset,
reports its cached bytes to the tree service, and the extender then scores node-a 10
and a node that caches nothing 0."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from testkit.mounts import Backing, mounted, world_traversable_tmpdir
from testkit.tree_server import TreeServer
from tests.k8s.conftest import post, recorded, running_extender

pytestmark = [pytest.mark.fuse, pytest.mark.slow]


def test_the_node_holding_the_cached_dataset_scores_highest(
    tree_server: TreeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("FUSE tests need /dev/fuse and root")
    data = world_traversable_tmpdir("cloudfs-ufs-")
    try:
        for i in range(4):
            path = data / "train" / f"shard-{i}.bin"
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(os.urandom(3 << 20))
        uri = tree_server.new_volume(f"file://{data}")
        volume = uri.rsplit("/", 1)[1]
        monkeypatch.setenv("CLOUDFS_NODE_NAME", "node-a")  # the CSI node plugin sets it
        monkeypatch.setenv("CLOUDFS_CACHE_REPORT_SECONDS", "1")
        body = recorded("prioritize_node_names.json")
        body["Pod"]["metadata"]["annotations"] = {"cloudfs.io/volumes": volume}
        body["NodeNames"] = ["node-b", "node-a"]  # node-b: no mount, nothing cached
        with (
            mounted(Backing(uri=uri, local_dir=data)) as mount,
            running_extender(tree_server.address, "--no-kube-api") as url,
        ):
            for shard in sorted((mount.root / "train").iterdir()):
                assert shard.read_bytes() == (data / "train" / shard.name).read_bytes()
            answer = _scores_once_reported(url, json.dumps(body).encode())
        assert answer == [{"Host": "node-b", "Score": 0}, {"Host": "node-a", "Score": 10}]
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _scores_once_reported(url: str, body: bytes, timeout: float = 30.0) -> list[dict[str, int]]:
    """The extender's answer once some report made a node score (reports come every 1 s)."""
    deadline = time.monotonic() + timeout
    while True:
        status, answer = post(url + "/prioritize", body)
        assert status == 200
        if any(h["Score"] for h in answer) or time.monotonic() > deadline:
            return list(answer)
        time.sleep(0.5)
