"""A static volume with ``cachePeers`` mounted for real: its reads go through a real
cache worker, which only a mount holding the group's token (``cacheToken``) gets blocks from."""

from __future__ import annotations

from pathlib import Path

from testkit.cache_workers import running_cache_worker
from tests.csi.harness import Driver, Kubelet, wait_until

TOKEN = "csi-cache-group-token-7d41"


def _blocks(cache_dir: Path) -> list[Path]:
    return [p for p in cache_dir.rglob("*") if p.is_file()]


def test_reads_go_through_the_cache_worker(kubelet: Kubelet, driver: Driver, data: Path) -> None:
    options = ["--allow-file-stores"]  # the test's UFS is a directory
    with running_cache_worker({}, token=TOKEN, options=options) as worker:
        ctx = {"uri": f"file://{data}", "cachePeers": worker.address}
        staging = kubelet.stage("vol-group", ctx, secrets={"cacheToken": TOKEN})
        target = kubelet.publish("vol-group", staging, ctx)
        assert (target / "train" / "0001.bin").read_bytes() == b"sample-1" * 1000
        wait_until(lambda: _blocks(worker.cache_dir / "blocks"), what="a block at the worker")
        assert "refused" not in worker.log().lower()
        kubelet.unpublish("vol-group", target)
        kubelet.unstage("vol-group", staging)
    assert TOKEN not in driver.log()
