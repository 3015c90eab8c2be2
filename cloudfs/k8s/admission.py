"""The data-readiness admission check for Kueue: what to do with one Workload.

Pure logic over objects as the API server returns them (dicts); the loop that
reads and writes them is ``admission_controller.py``. Kueue's contract
(``kueue.x-k8s.io/v1beta2``): a ClusterQueue lists AdmissionChecks; once a
Workload has reserved quota (condition ``QuotaReserved=True``) Kueue puts one
``status.admissionChecks[]`` entry per check in ``Pending``, and admits the
Workload when every entry is ``Ready``. ``Retry`` sends it back to the queue,
``Rejected`` deactivates it. Each check's controller writes only its own entry.

What "ready" means here. Kueue assigns ResourceFlavors, not nodes, so the
check picks the nodes: among the nodes of the assigned flavors (their
``nodeLabels``; every node when a flavor has none), the ``pods`` nodes that
already cache most of the workload's volumes, as mounts report it to the tree
service (``CachedBytes``). These are the nodes the scheduler extender then
scores highest, so the pods land where the warm-up went. The check is Ready
when each of those nodes holds at least ``fraction`` of every volume's bytes
(default 0.8; the Workload annotation ``cloudfs.io/ready-fraction``
overrides). A volume the tree service does not know is ``Rejected``; a
volume whose size is unknown, or no eligible node, is ``Retry``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"  # the storage version since Kueue v0.15; v1beta1 is deprecated
CONTROLLER_NAME = "cloudfs.io/data-readiness"
FIELD_MANAGER = "cloudfs-data-readiness"
READY_FRACTION_ANNOTATION = "cloudfs.io/ready-fraction"
DEFAULT_READY_FRACTION = 0.8
GIB = 1 << 30


class CheckState(str, Enum):
    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


class Action(str, Enum):
    NONE = "none"  # not ours, no quota yet, or already decided: write nothing
    WARM = "warm"  # start (or keep) warming on ``nodes``, report progress
    DECIDE = "decide"  # write a final state (Ready, Retry or Rejected)


@dataclass(frozen=True, slots=True)
class Readiness:
    """What the controller learned about a Workload's data.

    ``dataset_bytes``: volume -> its size (None: unknown). ``missing``: volumes
    the tree service does not know. ``cached``: volume -> node -> bytes cached
    there. ``eligible``: the nodes of the assigned flavors."""

    dataset_bytes: dict[str, int | None]
    cached: dict[str, dict[str, int]]
    eligible: list[str]
    missing: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    state: CheckState | None = None
    message: str = ""
    nodes: list[str] = field(default_factory=list)


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    status = obj.get("status") or {}
    return {c.get("type", ""): c for c in status.get("conditions") or [] if isinstance(c, dict)}


def quota_reserved(workload: dict[str, Any]) -> bool:
    return _conditions(workload).get("QuotaReserved", {}).get("status") == "True"


def check_state(workload: dict[str, Any], check: str) -> dict[str, Any] | None:
    """Our entry of ``status.admissionChecks``; None when Kueue added none (not ours)."""
    for state in (workload.get("status") or {}).get("admissionChecks") or []:
        if isinstance(state, dict) and state.get("name") == check:
            return state
    return None


def ready_fraction(workload: dict[str, Any], default: float = DEFAULT_READY_FRACTION) -> float:
    raw = ((workload.get("metadata") or {}).get("annotations") or {}).get(READY_FRACTION_ANNOTATION)
    try:
        value = float(raw) if raw is not None else default
    except ValueError:
        return default
    return value if 0.0 < value <= 1.0 else default


def pod_count(workload: dict[str, Any]) -> int:
    """Pods the admission reserved quota for (``podSetAssignments[].count``, else the spec)."""
    assignments = ((workload.get("status") or {}).get("admission") or {}).get(
        "podSetAssignments"
    ) or []
    counts = [a.get("count") for a in assignments if isinstance(a, dict)]
    if counts and all(isinstance(c, int) for c in counts):
        return max(1, sum(c for c in counts if isinstance(c, int)))
    podsets = (workload.get("spec") or {}).get("podSets") or []
    return max(1, sum(int(p.get("count", 1)) for p in podsets if isinstance(p, dict)))


def assigned_flavors(workload: dict[str, Any]) -> list[str]:
    """The ResourceFlavors Kueue assigned, each once."""
    assignments = ((workload.get("status") or {}).get("admission") or {}).get(
        "podSetAssignments"
    ) or []
    names = [f for a in assignments for f in (a.get("flavors") or {}).values()]
    return list(dict.fromkeys(n for n in names if isinstance(n, str)))


def needs_us(workload: dict[str, Any], check: str) -> bool:
    """Quota reserved, our check listed and still Pending: the only case we act on."""
    state = check_state(workload, check)
    return (
        state is not None
        and state.get("state", CheckState.PENDING.value) == CheckState.PENDING.value
        and quota_reserved(workload)
        and not (workload.get("metadata") or {}).get("deletionTimestamp")
    )


def decide(
    workload: dict[str, Any],
    check: str,
    view: Readiness,
    default_fraction: float = DEFAULT_READY_FRACTION,
) -> Decision:
    """What to do for ``check`` on ``workload`` given ``view`` (see the module docstring)."""
    if not needs_us(workload, check):
        return Decision(Action.NONE)
    if view.missing:
        names = ", ".join(sorted(view.missing))
        return Decision(Action.DECIDE, CheckState.REJECTED, f"no such CloudFS volume: {names}")
    if not view.dataset_bytes:
        return Decision(Action.DECIDE, CheckState.READY, "no CloudFS volumes to warm")
    unknown = sorted(v for v, size in view.dataset_bytes.items() if size is None)
    if unknown:
        return Decision(
            Action.DECIDE, CheckState.RETRY, f"size of volume {', '.join(unknown)} unknown"
        )
    if not view.eligible:
        return Decision(Action.DECIDE, CheckState.RETRY, "no node of the assigned flavors")
    sizes = {v: s for v, s in view.dataset_bytes.items() if s is not None}
    nodes = target_nodes(view, pod_count(workload))
    fraction = ready_fraction(workload, default_fraction)
    held = _held_fraction(view, sizes, nodes)
    total = sum(sizes.values())
    ready = all(
        view.cached.get(v, {}).get(n, 0) >= math.ceil(fraction * size)
        for v, size in sizes.items()
        for n in nodes
    )
    where = f"on {len(nodes)} node{'s' if len(nodes) != 1 else ''}"
    if ready:
        return Decision(
            Action.DECIDE,
            CheckState.READY,
            f"ready: {held:.0%} of {_size(total)} cached {where}",
            nodes,
        )
    return Decision(
        Action.WARM,
        CheckState.PENDING,
        f"warming: {held:.0%} of {_size(total)} cached {where} (ready at {fraction:.0%})",
        nodes,
    )


def target_nodes(view: Readiness, pods: int) -> list[str]:
    """The ``pods`` eligible nodes holding most of the volumes (ties: by name)."""
    sizes = {v: s or 1 for v, s in view.dataset_bytes.items()}

    def held(node: str) -> float:
        return sum(min(1.0, view.cached.get(v, {}).get(node, 0) / s) for v, s in sizes.items())

    ranked = sorted(dict.fromkeys(view.eligible), key=lambda n: (-held(n), n))
    return ranked[: max(1, pods)]


def _held_fraction(view: Readiness, sizes: dict[str, int], nodes: list[str]) -> float:
    want = sum(sizes.values()) * len(nodes)
    if want <= 0:
        return 1.0
    got = sum(min(view.cached.get(v, {}).get(n, 0), s) for v, s in sizes.items() for n in nodes)
    return got / want


def _size(n: int) -> str:
    return f"{n / GIB:.0f} GiB" if n >= GIB else f"{n / (1 << 20):.0f} MiB"


def now_rfc3339(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_patch(
    workload: dict[str, Any], check: str, decision: Decision, now: datetime | None = None
) -> dict[str, Any] | None:
    """The server-side-apply body for the Workload's ``status`` subresource, holding our
    entry only (``admissionChecks`` is a map list keyed by name, so other checks' entries,
    owned by their managers, stay as they are); None when nothing would change."""
    if decision.action is Action.NONE or decision.state is None:
        return None
    old = check_state(workload, check) or {}
    if old.get("state") == decision.state.value and old.get("message") == decision.message:
        return None
    changed = old.get("state") != decision.state.value
    metadata = workload.get("metadata") or {}
    entry = {
        "name": check,
        "state": decision.state.value,
        "message": decision.message[:32768],
        "lastTransitionTime": now_rfc3339(now)
        if changed or not old.get("lastTransitionTime")
        else old["lastTransitionTime"],
    }
    return {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "Workload",
        "metadata": {"name": metadata.get("name"), "namespace": metadata.get("namespace")},
        "status": {"admissionChecks": [entry]},
    }


def is_ours(admission_check: dict[str, Any], controller: str = CONTROLLER_NAME) -> bool:
    return (admission_check.get("spec") or {}).get("controllerName") == controller


def active_patch(
    admission_check: dict[str, Any], now: datetime | None = None
) -> dict[str, Any] | None:
    """The apply body setting the AdmissionCheck's ``Active=True`` condition (Kueue keeps a
    ClusterQueue inactive while one of its checks is not Active); None when already set."""
    current = _conditions(admission_check).get("Active", {})
    generation = (admission_check.get("metadata") or {}).get("generation", 0)
    if current.get("status") == "True" and current.get("observedGeneration") == generation:
        return None
    return {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "AdmissionCheck",
        "metadata": {"name": (admission_check.get("metadata") or {}).get("name")},
        "status": {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "ControllerRunning",
                    "message": "the CloudFS data-readiness controller is running",
                    "lastTransitionTime": now_rfc3339(now),
                    "observedGeneration": generation,
                }
            ]
        },
    }
