"""MeteredObjectStore counts requests, bytes, errors and latency of the store it wraps."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudfs.errors import NotFound
from cloudfs.metrics import Metrics
from cloudfs.ufs.local import LocalObjectStore
from cloudfs.ufs.metered import MeteredObjectStore


def value(metrics: Metrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def test_requests_bytes_errors_and_latency(tmp_path: Path) -> None:
    metrics = Metrics()
    store = MeteredObjectStore(LocalObjectStore(str(tmp_path)), metrics)
    store.put_bytes("a", b"x" * 1000)
    assert store.get_range("a", 10, 100) == b"x" * 100
    with store.get_stream("a", 500) as stream:
        assert stream.read() == b"x" * 500
    with pytest.raises(NotFound):
        store.head("missing")
    assert value(metrics, "cloudfs_ufs_requests_total", op="put") == 1
    assert value(metrics, "cloudfs_ufs_requests_total", op="get") == 2
    assert value(metrics, "cloudfs_ufs_bytes_total", direction="out") == 1000
    assert value(metrics, "cloudfs_ufs_bytes_total", direction="in") == 600
    assert value(metrics, "cloudfs_ufs_errors_total", op="head") == 1
    assert value(metrics, "cloudfs_ufs_request_seconds_count", op="get") == 2


def test_a_stream_fills_a_callers_buffer_and_counts_it(tmp_path: Path) -> None:
    # The read-ahead reads each block into one reused buffer (data/body.py): the
    # counting wrapper must pass readinto through, not hide it.
    metrics = Metrics()
    store = MeteredObjectStore(LocalObjectStore(str(tmp_path)), metrics)
    store.put_bytes("a", bytes(range(256)) * 8)
    buffer = bytearray(1000)
    with store.get_stream("a", 48) as stream:
        assert stream.readinto(buffer) == 1000
    assert buffer == (bytes(range(256)) * 8)[48:1048]
    assert value(metrics, "cloudfs_ufs_bytes_total", direction="in") == 1000
