"""The cache-group view of ``cloudfs stats``: one row per member of the mount's group.

Read from the ``cloudfs_peer_*`` series (``cloudfs.peers.client``): the ring as
the mount sees it now (``cloudfs_peer_member_up``: 1 in use, 0 left out for a
back-off) and, since mount, what each member answered. A member that left the
group keeps its counters but no longer has an ``up`` series.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Samples = Mapping[tuple[str, frozenset[tuple[str, str]]], float]

_RESULTS = {"hit": "hits", "miss": "misses", "error": "errors"}


@dataclass(frozen=True, slots=True)
class MemberRow:
    member: str
    up: bool | None = None  # None: not in the ring now (counters from before)
    hits: float = 0.0  # it held the block
    misses: float = 0.0  # it fetched the block from the origin for us
    errors: float = 0.0  # we read the block from the UFS ourselves
    bytes: float = 0.0
    seconds: float = 0.0  # answering, in all
    answers: float = 0.0
    backoffs: float = 0.0

    @property
    def mean_latency(self) -> float | None:
        return self.seconds / self.answers if self.answers else None

    def to_json(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "in_ring": self.up is not None,
            "up": bool(self.up),
            "hits": int(self.hits),
            "misses": int(self.misses),
            "errors": int(self.errors),
            "bytes": int(self.bytes),
            "mean_latency_seconds": self.mean_latency,
            "backoffs": int(self.backoffs),
        }


def parse_group(samples: Samples) -> list[MemberRow]:
    """Every member the mount knows of, those in the ring first, then by name."""
    values: dict[str, dict[str, Any]] = {}
    for (name, labels), value in samples.items():
        label = dict(labels)
        member = label.get("member")
        if member is None or not name.startswith("cloudfs_peer_"):
            continue
        fields = values.setdefault(member, {})
        if name == "cloudfs_peer_member_up":
            fields["up"] = value >= 1.0
        elif name == "cloudfs_peer_requests_total" and label.get("result") in _RESULTS:
            fields[_RESULTS[label["result"]]] = value
        elif name == "cloudfs_peer_bytes_total":
            fields["bytes"] = value
        elif name == "cloudfs_peer_request_seconds_sum":
            fields["seconds"] = value
        elif name == "cloudfs_peer_request_seconds_count":
            fields["answers"] = value
        elif name == "cloudfs_peer_backoffs_total":
            fields["backoffs"] = value
    found = [MemberRow(member, **fields) for member, fields in values.items()]
    return sorted(found, key=lambda m: (m.up is None, m.member))


def rows(members: Iterable[MemberRow], percent: Any, seconds: Any, size: Any) -> list[list[str]]:
    """The group table's cells (formatters passed in by the view)."""
    out = [["Group", "state", "hit", "hits", "misses", "errors", "bytes", "mean", "backoffs"]]
    for m in members:
        asked = m.hits + m.misses + m.errors
        state = "gone" if m.up is None else "up" if m.up else "left out"
        out.append(
            [
                f"  {m.member}",
                state,
                percent(m.hits / asked if asked else None),
                f"{m.hits:.0f}",
                f"{m.misses:.0f}",
                f"{m.errors:.0f}",
                size(m.bytes),
                seconds(m.mean_latency),
                f"{m.backoffs:.0f}",
            ]
        )
    return out
