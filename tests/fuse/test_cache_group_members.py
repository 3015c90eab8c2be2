"""Named cache groups through real processes: ``cloudfs meta serve`` keeps the group,
``cloudfs cache serve --group`` workers join it, and ``grpc://`` mounts with
``--cache-group`` follow it; mounts with ``--cache-group-serve`` serve each other.

What the object store sent is counted at the proxy in front of moto; the
ring as the mount sees it comes from its ``cloudfs_peer_member_up`` gauge (one per member,
in use or left out).
"""

from __future__ import annotations

import os
import random
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cloudfs.peers.membership import REFRESH_SECONDS, TTL_HEARTBEATS
from cloudfs.peers.ring import Ring
from testkit.cache_workers import CacheWorker, running_cache_worker
from testkit.faults_proxy import FaultsProxy, running_proxy
from testkit.mounts import Backing, Mount, mounted
from testkit.servers import S3Server, free_port
from testkit.tree_server import TreeServer, running_tree_server
from tests.fuse.conftest import _require_fuse
from tests.fuse.test_cache_group import (
    DATASET,
    DATASET_BLOCKS,
    DATASET_BYTES,
    in_parallel,
    read_all,
    scrape,
)

pytestmark = pytest.mark.slow

HEARTBEAT = 0.5  # the workers' --heartbeat: listed for TTL_HEARTBEATS of them
SLACK = 5.0  # seconds of process scheduling on a busy 2-core machine


@dataclass
class World:
    backing: Backing  # a grpc:// volume over the bucket
    proxy: FaultsProxy
    tree: TreeServer

    def body_gets(self) -> int:
        return sum(1 for m, t in self.proxy.requests if m == "GET" and "list-type" not in t)

    def worker_options(self, group: str) -> list[str]:
        return [
            "--s3-endpoint", self.proxy.endpoint, "--cache-size", "256M", "--group", group,
            "--meta", f"grpc://{self.tree.address}", "--heartbeat", str(HEARTBEAT),
        ]  # fmt: skip

    def mount_options(self, group: str, *more: str) -> list[str]:
        return [
            "--s3-endpoint", self.proxy.endpoint, "--meta-ttl", "600", "--block-size", "64K",
            "--cache-group", group, *more,
        ]  # fmt: skip


@pytest.fixture
def world(s3_server: S3Server) -> Iterator[World]:
    _require_fuse()
    bucket = f"members-{os.getpid()}-{random.randrange(1 << 30)}"
    s3_server.client().create_bucket(Bucket=bucket)  # type: ignore[no-untyped-call]
    with running_tree_server(env=s3_server.env()) as tree:
        backing = Backing(uri=tree.new_volume(f"s3://{bucket}"), s3=s3_server, bucket=bucket)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda kv: backing.write_object(*kv), DATASET.items()))
        with running_proxy(s3_server.endpoint) as proxy:
            yield World(backing, proxy, tree)


@contextmanager
def group_mounts(world: World, options: list[list[str]]) -> Iterator[list[tuple[Mount, int]]]:
    """One mount (empty cache) per options list, each with its metrics port."""
    with ExitStack() as stack:
        found = []
        for opts in options:
            port = free_port()
            m = stack.enter_context(
                mounted(world.backing, [*opts, "--metrics", f"127.0.0.1:{port}"])
            )
            found.append((m, port))
        yield found


def ring_of(port: int) -> tuple[str, ...]:
    """The members of the mount's ring, from its gauge."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return tuple(
        sorted(
            s.labels["member"]
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "cloudfs_peer_member_up"
        )
    )


def wait_for(check: Callable[[], bool], timeout: float) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, "timed out"
        time.sleep(0.1)
    return time.monotonic() - start


def moved_share(old: tuple[str, ...], new: tuple[str, ...], keys: int = 20_000) -> float:
    """The share of block keys whose owner differs between the two rings; every moved key
    must have moved to a member the old ring lacked."""
    before, after = Ring(old), Ring(new)
    moved = 0
    for n in range(keys):
        key = f"{n:064x}"
        if before.owner(key) != after.owner(key):
            assert after.owner(key) not in old
            moved += 1
    return moved / keys


def test_a_named_group_serves_the_dataset_once_and_follows_joins_deaths_and_returns(
    world: World,
) -> None:
    env = world.backing.env()
    options = world.worker_options("train")
    follow = REFRESH_SECONDS + SLACK  # a listed change reaches the mount within this
    with ExitStack() as stack:
        workers: list[CacheWorker] = [
            stack.enter_context(running_cache_worker(env, options=options)) for _ in range(3)
        ]
        three = tuple(sorted(w.address for w in workers))
        ms = stack.enter_context(group_mounts(world, [world.mount_options("train")] * 2))
        for _, port in ms:
            wait_for(lambda p=port: ring_of(p) == three, follow)  # type: ignore[misc]
        world.proxy.reset_counts()
        assert in_parallel([m.root for m, _ in ms]) == []
        sent = world.proxy.response_bytes("GET")
        assert DATASET_BYTES <= sent <= 1.1 * DATASET_BYTES, (sent, DATASET_BYTES)
        assert world.body_gets() <= 1.1 * DATASET_BLOCKS, (world.body_gets(), DATASET_BLOCKS)
        for _, port in ms:
            assert scrape(port, "cloudfs_ufs_requests_total", op="get") == 0

        # A fourth worker joins: picked up within the refresh, a quarter of the blocks move.
        fourth = stack.enter_context(running_cache_worker(env, options=options))
        four = tuple(sorted([*three, fourth.address]))
        _, port = ms[0]
        wait_for(lambda: ring_of(port) == four, follow + 3 * HEARTBEAT)
        share = moved_share(three, ring_of(port))
        assert 0.2 <= share <= 0.3, share
        assert scrape(port, "cloudfs_peer_group_size") == 4
        # A fresh mount reads everything: the new worker owns (and fetches) about 1/4.
        world.proxy.reset_counts()
        with group_mounts(world, [world.mount_options("train")]) as [(fresh, fresh_port)]:
            wait_for(lambda: ring_of(fresh_port) == four, follow)
            assert read_all(fresh.root, sorted(DATASET)) == []
            asked = scrape(fresh_port, "cloudfs_peer_requests_total")
            of_fourth = scrape(fresh_port, "cloudfs_peer_requests_total", member=fourth.address)
            assert 0.15 * asked <= of_fourth <= 0.35 * asked, (of_fourth, asked)
        assert world.body_gets() <= 0.4 * DATASET_BLOCKS, world.body_gets()

        # A killed worker's registration expires; restarted, it is listed again.
        dead = workers[1]
        dead.kill()
        took = wait_for(
            lambda: dead.address not in ring_of(port), TTL_HEARTBEATS * HEARTBEAT + follow
        )
        assert len(ring_of(port)) == 3, took
        dead.restart()
        wait_for(lambda: ring_of(port) == four, follow + 3 * HEARTBEAT)
        for m, _ in ms:
            assert read_all(m.root, sorted(DATASET)[:10]) == []


def test_two_serving_mounts_take_each_others_blocks_from_the_store_once(world: World) -> None:
    serving = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    options = [world.mount_options("pods", "--cache-group-serve", a) for a in serving]
    with group_mounts(world, options) as [(first, p1), (second, p2)]:
        for port in (p1, p2):
            wait_for(lambda p=port: ring_of(p) == tuple(sorted(serving)), REFRESH_SECONDS + SLACK)  # type: ignore[misc]
        world.proxy.reset_counts()
        assert read_all(first.root, sorted(DATASET)) == []  # cold: each block from the store
        assert read_all(second.root, sorted(DATASET)) == []  # from its own tiers or the first's
        sent = world.proxy.response_bytes("GET")
        assert DATASET_BYTES <= sent <= 1.1 * DATASET_BYTES, (sent, DATASET_BYTES)
        assert world.body_gets() <= 1.1 * DATASET_BLOCKS, (world.body_gets(), DATASET_BLOCKS)
        # The second mount's blocks came from the first (hits) or from its own tiers,
        # filled while it served the first: neither mount asked itself.
        assert scrape(p2, "cloudfs_peer_requests_total", result="hit") >= DATASET_BLOCKS / 4
        assert scrape(p1, "cloudfs_peer_requests_total", member=serving[0]) == 0
        assert scrape(p2, "cloudfs_peer_requests_total", member=serving[1]) == 0
        assert scrape(p1, "cloudfs_worker_blocks_total") > 0  # the first served the second
