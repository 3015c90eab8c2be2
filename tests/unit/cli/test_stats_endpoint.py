"""``cloudfs stats HOST:PORT``: a process without a mount, read from its ``--metrics``
endpoint over real HTTP (prometheus_client's server, as the gateway serves it)."""

from __future__ import annotations

import io
import json

import pytest

from cloudfs.cli import stats
from cloudfs.cli.main import main
from cloudfs.cli.stats_json import snapshot_json
from cloudfs.cli.stats_model import Interval, parse_snapshot
from cloudfs.cli.stats_source import endpoint_url, is_endpoint
from cloudfs.cli.stats_view import render
from cloudfs.lib.endpoints import serve_metrics
from cloudfs.metrics import Metrics
from testkit.servers import free_port

MiB = 1024 * 1024


@pytest.fixture
def endpoint() -> tuple[str, Metrics]:
    m = Metrics()
    m.cache_hits.labels(tier="memory").inc(9)
    m.cache_misses.labels(tier="memory").inc(1)
    m.ufs_requests.labels("get").inc(1)
    m.ufs_bytes.labels("read").inc(4 * MiB)
    address = f"127.0.0.1:{free_port()}"
    serve_metrics(address, m)
    return address, m


def test_targets_are_told_apart() -> None:
    assert is_endpoint("127.0.0.1:9100") and is_endpoint("http://gw:9100/metrics")
    assert is_endpoint("[::1]:9100")
    assert not is_endpoint("/mnt/data") and not is_endpoint("data") and not is_endpoint("./a:1")
    assert endpoint_url("gw:9100") == "http://gw:9100/metrics"
    assert endpoint_url("http://gw:9100/other") == "http://gw:9100/other"


def test_json_of_an_endpoint(
    endpoint: tuple[str, Metrics], capsys: pytest.CaptureFixture[str]
) -> None:
    address, _ = endpoint
    assert main(["stats", address, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mount"] == {"endpoint": f"http://{address}/metrics"}
    assert doc["tiers"]["memory"]["hit_ratio"] == 0.9
    assert doc["ufs"]["bytes"] == {"read": 4 * MiB}


def test_the_live_view_of_an_endpoint_has_no_fuse_rows(endpoint: tuple[str, Metrics]) -> None:
    address, _ = endpoint
    out = io.StringIO()
    stats.live(address, 0.05, 1, out)
    text = out.getvalue()
    assert text.startswith(f"CloudFS http://{address}/metrics\n")
    assert "memory" in text and "90.0%" in text
    for mount_only in ("FUSE", "Write-back", "Prefetch", "Latency", "Jobs"):
        assert mount_only not in text


def test_nothing_listening_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", f"127.0.0.1:{free_port()}", "--json"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cloudfs: http://127.0.0.1:") and err.count("\n") == 1


GATEWAY_TEXT = """\
# TYPE cloudfs_gateway_requests_total counter
cloudfs_gateway_requests_total{op="GetObject",status="200"} 8
cloudfs_gateway_requests_total{op="GetObject",status="404"} 2
cloudfs_gateway_requests_total{op="PutObject",status="200"} 1
# TYPE cloudfs_gateway_bytes_total counter
cloudfs_gateway_bytes_total{op="GetObject",direction="out"} 4096
cloudfs_gateway_bytes_total{op="PutObject",direction="in"} 100
# TYPE cloudfs_gateway_request_seconds histogram
cloudfs_gateway_request_seconds_bucket{op="GetObject",le="0.01"} 10
cloudfs_gateway_request_seconds_bucket{op="GetObject",le="+Inf"} 10
cloudfs_gateway_request_seconds_count{op="GetObject"} 10
cloudfs_gateway_request_seconds_sum{op="GetObject"} 0.05
"""


def test_the_gateway_table_counts_refusals_per_operation() -> None:
    snap = parse_snapshot(GATEWAY_TEXT, {"endpoint": "http://gw:9100/metrics"}, 0.0)
    doc = snapshot_json(snap)["gateway"]
    assert [op["op"] for op in doc] == ["GetObject", "PutObject"]
    get, put = doc
    assert (get["requests"], get["errors"], get["bytes_out"]) == (10, 2, 4096)
    assert get["mean_latency_seconds"] == pytest.approx(0.005)
    assert (put["requests"], put["errors"], put["bytes_in"]) == (1, 0, 100)
    lines = render(snap, Interval.between(snap, snap))
    assert any(line.split()[:3] == ["GetObject", "10", "2"] for line in lines)
