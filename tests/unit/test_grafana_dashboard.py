"""deploy/grafana/cloudfs-dashboard.json: importable structure, and only metrics CloudFS exposes.

The metric names a query may use are not listed here: they come from what a
fresh ``cloudfs.metrics.Metrics`` actually exposes (prometheus_client's text
format, after one child of every labelled metric is touched so that its series
exist), so renaming or dropping a metric in ``metrics.py`` fails this test
instead of leaving an empty panel behind. The queries themselves are run
against a real Prometheus in tests/integration/test_metrics_prometheus.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from cloudfs.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "cloudfs-dashboard.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
METRIC_RE = re.compile(r"\b(cloudfs_[a-zA-Z0-9_]+)\b")
RATE_RE = re.compile(r"\b(?:rate|irate|increase)\(\s*(cloudfs_[a-zA-Z0-9_]+)")
QUANTILE_RE = re.compile(r"histogram_quantile\(")


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows included, and the panels inside collapsed rows."""
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def query_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in all_panels(dashboard) if p["type"] != "row"]


def exposed_samples() -> dict[str, str]:
    """Sample name -> metric type, for every series a fresh Metrics() exposes."""
    metrics = Metrics()
    metrics.peer_members_view = lambda: [("x", True)]  # set by a PeerGroup
    metrics.fuse_receiver_view = lambda: (1, 1, 1)  # set by a mount with the patched pyfuse3
    for collector in vars(metrics).values():
        if not isinstance(collector, MetricWrapperBase):
            continue
        labelnames = getattr(collector, "_labelnames", ())
        child = collector.labels(*("x" for _ in labelnames)) if labelnames else collector
        if isinstance(collector, Counter):
            child.inc()
        elif isinstance(collector, Gauge):
            child.set(1)
        elif isinstance(collector, Histogram):
            child.observe(0.01)
    text = generate_latest(metrics.registry).decode()
    return {
        sample.name: family.type
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in query_panels(dashboard) for t in p["targets"]]


def test_dashboard_is_a_grafana_10_dashboard(dashboard: dict[str, Any]) -> None:
    assert dashboard["schemaVersion"] >= 36  # Grafana 9.x/10.x/11.x dashboards: 36..39+
    assert dashboard["title"] and dashboard["uid"]
    assert dashboard["id"] is None  # import assigns one
    assert dashboard["panels"]
    required = {(r["type"], r["id"]) for r in dashboard["__requires"]}
    assert ("datasource", "prometheus") in required
    for panel_type in {p["type"] for p in query_panels(dashboard)}:
        assert ("panel", panel_type) in required, panel_type


def test_datasource_and_instance_variables(dashboard: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    instance = variables["instance"]
    assert instance["type"] == "query"
    assert instance["datasource"] == DATASOURCE
    assert instance["includeAll"] and instance["multi"] and instance["allValue"] == ".*"
    definition = instance["definition"]
    assert definition == instance["query"]["query"]
    m = re.fullmatch(r"label_values\((cloudfs_\w+), instance\)", definition)
    assert m, definition
    # a series every mount exposes from the start (gauges are set at construction)
    assert exposed_samples().get(m.group(1)) == "gauge"


def test_panel_ids_are_unique_and_every_panel_has_queries(dashboard: dict[str, Any]) -> None:
    ids = [p["id"] for p in all_panels(dashboard)]
    assert len(ids) == len(set(ids)), sorted(ids)
    assert all(isinstance(i, int) and i > 0 for i in ids)
    for panel in query_panels(dashboard):
        title = panel["title"]
        assert title, panel["id"]
        targets = panel.get("targets")
        assert targets, title
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), title
        for t in targets:
            assert t.get("expr", "").strip(), (title, t["refId"])


def test_every_query_uses_the_datasource_variable(dashboard: dict[str, Any]) -> None:
    for panel in query_panels(dashboard):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        for t in panel["targets"]:
            assert t["datasource"] == DATASOURCE, (panel["title"], t["refId"])
    # the datasource is a dashboard variable, not an import-time ${DS_...} placeholder,
    # so the same file works through "Import dashboard" and through file provisioning
    assert "${DS_" not in DASHBOARD.read_text()


def test_every_selector_is_filtered_by_instance(dashboard: dict[str, Any]) -> None:
    for title, expr in exprs(dashboard):
        for m in METRIC_RE.finditer(expr):
            rest = expr[m.end() :]
            assert rest.startswith('{instance=~"$instance"'), (title, m.group(1))


def test_panels_do_not_overlap(dashboard: dict[str, Any]) -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:  # top level: the grid Grafana lays out
        g = panel["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, panel["title"]
        assert g["y"] >= 0 and g["h"] > 0, panel["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                other = cells.setdefault((x, y), panel["title"])
                assert other == panel["title"], f"{panel['title']!r} overlaps {other!r}"


def test_every_metric_in_a_query_is_exposed_by_cloudfs(dashboard: dict[str, Any]) -> None:
    exposed = exposed_samples()
    unknown = sorted(
        {(name, title) for title, expr in exprs(dashboard) for name in METRIC_RE.findall(expr)}
        - {(name, title) for title, expr in exprs(dashboard) for name in exposed}
    )
    assert not unknown, f"queries use metrics that Metrics() does not expose: {unknown}"


def test_rates_are_over_counters_and_quantiles_over_buckets(dashboard: dict[str, Any]) -> None:
    exposed = exposed_samples()
    for title, expr in exprs(dashboard):
        for name in RATE_RE.findall(expr):
            assert exposed.get(name) in ("counter", "histogram"), (title, name)
        if QUANTILE_RE.search(expr):
            names = METRIC_RE.findall(expr)
            assert names and all(n.endswith("_bucket") for n in names), (title, expr)
            assert re.search(r"by \(le\b|by \([^)]*\ble\b", expr), (title, expr)
        for name in METRIC_RE.findall(expr):
            if exposed.get(name) == "gauge":
                assert name not in RATE_RE.findall(expr), (title, name)


def test_every_cloudfs_metric_has_a_panel(dashboard: dict[str, Any]) -> None:
    """A new metric in metrics.py gets a panel (or this test says which one has none)."""
    used = {name for _, expr in exprs(dashboard) for name in METRIC_RE.findall(expr)}
    families: dict[str, set[str]] = {}
    for sample, _type in exposed_samples().items():
        base = re.sub(r"_(total|created|bucket|count|sum)$", "", sample)
        families.setdefault(base, set()).add(sample)
    unused = sorted(base for base, samples in families.items() if not samples & used)
    assert not unused, f"metrics with no panel on the dashboard: {unused}"


def test_the_panels_the_dashboard_promises(dashboard: dict[str, Any]) -> None:
    """The views operators asked for: the per-tier ratio, latency quantiles, prefetch use."""
    joined: dict[str, str] = {}
    for title, expr in exprs(dashboard):
        joined[title] = f"{joined.get(title, '')} {expr}"
    hit_ratio = [
        e for e in joined.values()
        if "rate(cloudfs_blockcache_hits_total" in e and "cloudfs_blockcache_misses_total" in e
        and "by (tier)" in e
    ]  # fmt: skip
    assert hit_ratio, "no rate-based hit ratio by tier"
    for metric in ("cloudfs_ufs_request_seconds_bucket", "cloudfs_fuse_op_seconds_bucket"):
        quantiles = [e for e in joined.values() if metric in e]
        assert quantiles, metric
        assert "histogram_quantile(0.5," in quantiles[0], metric
        assert "histogram_quantile(0.99," in quantiles[0], metric
    for metric in (
        "cloudfs_prefetch_bytes_total",
        "cloudfs_prefetch_used_bytes_total",
        "cloudfs_prefetch_wasted_bytes_total",
        "cloudfs_fuse_errors_total",
        "cloudfs_ufs_errors_total",
    ):
        assert any(metric in e for e in joined.values()), metric
