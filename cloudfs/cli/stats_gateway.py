"""The S3 gateway's view in ``cloudfs stats``: one row per S3 operation.

Read from the ``cloudfs_gateway_*`` series (``cloudfs.gateway.metrics``): the
requests of each operation and how many were refused (an S3 error: 4xx or 5xx),
the bytes they carried, and their latency. Since the gateway started; the
block cache's hit ratio and the UFS traffic are the tables every view has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Samples = Mapping[tuple[str, frozenset[tuple[str, str]]], float]

REQUESTS = "cloudfs_gateway_requests_total"
BYTES = "cloudfs_gateway_bytes_total"
SECONDS = "cloudfs_gateway_request_seconds"


@dataclass(frozen=True, slots=True)
class OpRow:
    op: str
    requests: float = 0.0
    errors: float = 0.0  # answered with an S3 error
    bytes_in: float = 0.0
    bytes_out: float = 0.0
    seconds: float = 0.0
    timed: float = 0.0
    p99: float | None = None

    @property
    def mean_latency(self) -> float | None:
        return self.seconds / self.timed if self.timed else None

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "requests": int(self.requests),
            "errors": int(self.errors),
            "bytes_in": int(self.bytes_in),
            "bytes_out": int(self.bytes_out),
            "mean_latency_seconds": self.mean_latency,
            "p99_seconds": self.p99,
        }


def parse_gateway(samples: Samples, p99: Mapping[str, float | None]) -> list[OpRow]:
    """Every operation the gateway has served, the busiest first; ``p99`` by op (from
    the latency histogram, which the view parses)."""
    values: dict[str, dict[str, float]] = {}
    for (name, labels), value in samples.items():
        if not name.startswith("cloudfs_gateway_"):
            continue
        label = dict(labels)
        op = label.get("op")
        if op is None:
            continue
        fields = values.setdefault(op, {})
        if name == REQUESTS:
            fields["requests"] = fields.get("requests", 0.0) + value
            if _refused(label.get("status", "")):
                fields["errors"] = fields.get("errors", 0.0) + value
        elif name == BYTES:
            key = "bytes_in" if label.get("direction") == "in" else "bytes_out"
            fields[key] = fields.get(key, 0.0) + value
        elif name == f"{SECONDS}_sum":
            fields["seconds"] = fields.get("seconds", 0.0) + value
        elif name == f"{SECONDS}_count":
            fields["timed"] = fields.get("timed", 0.0) + value
    rows = [OpRow(op, p99=p99.get(op), **fields) for op, fields in values.items()]
    return sorted(rows, key=lambda r: (-r.requests, r.op))


def _refused(status: str) -> bool:
    return status[:1] in ("4", "5")


def rows(ops: Iterable[OpRow], seconds: Any, size: Any) -> list[list[str]]:
    """The gateway table's cells (formatters passed in by the view)."""
    out = [["Gateway", "requests", "errors", "in", "out", "mean", "p99"]]
    for r in ops:
        out.append(
            [
                f"  {r.op}",
                f"{r.requests:.0f}",
                f"{r.errors:.0f}",
                size(r.bytes_in),
                size(r.bytes_out),
                seconds(r.mean_latency),
                seconds(r.p99),
            ]
        )
    return out
