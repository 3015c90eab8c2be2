"""One block from a cache worker vs from the origin, and what the ring costs per block.

- ``peer_vs_origin``: one worker (``cloudfs cache serve``, loopback) is asked for the
  4 MiB blocks of one large object once (it fetches them from the origin through the
  proxy: timed as "worker, cold"), then block 0 ``calls`` times in a row (it holds it:
  timed as the peer transfer), then every block from 4 threads at once (the worker's
  serving rate). Against it: the same 4 MiB range of the object GET with boto3, ``calls``
  times, through the delaying proxy and straight to moto. Medians.
- ``ring_costs``: ``Ring.owner`` and ``Ring.ranked`` per block key for groups of 10, 100
  and 1,000 members; the share of keys that change owner when one member joins; and how
  unevenly the keys fall (the busiest member's share over the mean).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import http.client
import statistics
import threading
import time
from collections import Counter
from typing import Any

from bench.origin import client as origin_client
from cloudfs.peers import wire
from cloudfs.peers.ring import Ring
from cloudfs.ufs.factory import parse_uri
from testkit.cache_workers import running_cache_worker

MiB = 1 << 20
BLOCK = 4 * MiB
THREADS = 4


def _median_seconds(fn: Any, calls: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times


def peer_vs_origin(
    env: dict[str, str],
    proxy_endpoint: str,
    direct_endpoint: str,
    bucket: str,
    key: str,
    calls: int,
) -> dict[str, Any]:
    s3 = origin_client(direct_endpoint, env)
    head = s3.head_object(Bucket=bucket, Key=key)
    size = int(head["ContentLength"])
    blocks = max(1, size // BLOCK)
    out: dict[str, Any] = {"key": key, "object_size": size, "block_size": BLOCK, "calls": calls}
    options = ["--s3-endpoint", proxy_endpoint, "--memory-cache-size", "256M"]
    with running_cache_worker(env, options=options) as worker:
        host, _, port = worker.address.rpartition(":")
        local = threading.local()  # one keep-alive connection per thread, as a mount keeps

        def get(index: int) -> str:
            """Block ``index`` over the wire a mount uses (wire.py); where the worker had it."""
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPConnection(host, int(port), timeout=60)
            query = wire.Query(
                store_uri=parse_uri(f"s3://{bucket}").normalized,
                key=key,
                etag=head["ETag"].strip('"'),
                object_size=size,
                block_size=BLOCK,
                index=index,
            )
            conn.request("GET", query.target())
            response = conn.getresponse()
            data = response.read()
            if response.status != 200 or len(data) != BLOCK:
                raise RuntimeError(f"worker answered {response.status} with {len(data)} bytes")
            return response.getheader(wire.SOURCE_HEADER) or "?"

        cold = []
        for i in range(blocks):
            t = time.perf_counter()
            get(i)
            cold.append(time.perf_counter() - t)
        sources = Counter(get(0) for _ in range(3))
        peer_s, _ = _median_seconds(lambda: get(0), calls)
        start = time.perf_counter()
        indexes = [i % blocks for i in range(max(calls, THREADS * 8))]
        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(get, indexes))
        served_s = time.perf_counter() - start
    out["worker_cold_s"] = statistics.median(cold)
    out["peer_s"] = peer_s
    out["peer_source"] = dict(sources)
    out["peer_mib_s"] = BLOCK / MiB / peer_s
    out["worker_threads"] = THREADS
    out["worker_serving_mib_s"] = len(indexes) * BLOCK / MiB / served_s
    ranged = {"Bucket": bucket, "Key": key, "Range": f"bytes=0-{BLOCK - 1}"}
    for name, endpoint in (("origin_delayed", proxy_endpoint), ("origin_direct", direct_endpoint)):
        c = origin_client(endpoint, env)
        c.get_object(**ranged)["Body"].read()  # connection set up outside the timing
        secs, _ = _median_seconds(lambda c=c: c.get_object(**ranged)["Body"].read(), calls)
        out[f"{name}_s"] = secs
        out[f"{name}_mib_s"] = BLOCK / MiB / secs
    out["speedup_vs_delayed"] = out["origin_delayed_s"] / peer_s
    out["speedup_vs_direct"] = out["origin_direct_s"] / peer_s
    return out


def _keys(count: int) -> list[str]:
    return [hashlib.sha256(str(i).encode()).hexdigest() for i in range(count)]


def _per_call_us(fn: Any, keys: list[str]) -> float:
    start = time.perf_counter()
    for k in keys:
        fn(k)
    return (time.perf_counter() - start) / len(keys) * 1e6


def ring_costs(
    sizes: tuple[int, ...] = (10, 100, 1000), quick: bool = False
) -> list[dict[str, Any]]:
    out = []
    for n in sizes:
        members = [f"10.0.{i // 250}.{i % 250}:7080" for i in range(n)]
        ring = Ring(members)
        joined = Ring([*members, "10.9.9.9:7080"])
        timing = _keys(200 if n >= 1000 or quick else 1000)
        spread = _keys(max(2000, 20 * n) // (5 if quick and n >= 1000 else 1))
        owners = [ring.owner(k) for k in spread]
        moved = sum(1 for k, o in zip(spread, owners, strict=True) if joined.owner(k) != o)
        counts = Counter(owners)
        mean = len(spread) / n
        out.append(
            {
                "members": n,
                "owner_us": _per_call_us(ring.owner, timing),
                "ranked_us": _per_call_us(ring.ranked, timing),
                "keys": len(spread),
                "moved_on_join": moved / len(spread),
                "expected_moved": 1 / (n + 1),
                "busiest_over_mean": max(counts.values()) / mean,
            }
        )
    return out
