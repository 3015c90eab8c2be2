"""The JSON of kube-scheduler's extender protocol (k8s.io/kube-scheduler/extender/v1).

kube-scheduler's ``HTTPExtender`` POSTs ``json.Marshal`` of the Go structs to
``urlPrefix + "/" + verb``. Those structs carry no json tags, so the keys are
the Go field names:

* ``ExtenderArgs``: ``Pod`` (a v1.Pod), ``Nodes`` (a v1.NodeList, ``null`` when
  the extender is ``nodeCacheCapable``) and ``NodeNames`` (a list of names,
  ``null`` unless ``nodeCacheCapable``).
* ``ExtenderFilterResult``: ``Nodes``, ``NodeNames``, ``FailedNodes`` and
  ``FailedAndUnresolvableNodes`` (name -> reason) and ``Error``. The scheduler
  reads ``NodeNames`` when nodeCacheCapable (and it is not null), else ``Nodes``.
* ``HostPriorityList``: a list of ``{"Host": name, "Score": int64}``, scores
  0..10 (``MaxExtenderPriority``), multiplied by the extender's weight.

Go's decoder matches keys case-insensitively, so requests are read that way
too; answers use the exact field names. A non-200 answer fails the call on the
scheduler's side (and the pod's scheduling cycle, unless ``ignorable``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_EXTENDER_PRIORITY = 10
MIN_EXTENDER_PRIORITY = 0


class BadRequest(ValueError):
    """The body is not an ``ExtenderArgs``."""


@dataclass(frozen=True)
class ExtenderArgs:
    pod: dict[str, Any]
    nodes: list[dict[str, Any]] | None  # full v1.Node objects (not nodeCacheCapable)
    node_names: list[str] | None  # names only (nodeCacheCapable)

    @property
    def candidates(self) -> list[str]:
        """The candidate node names, in the order given."""
        if self.node_names is not None:
            return list(self.node_names)
        return [node_name(n) for n in self.nodes or []]


def _field(body: dict[str, Any], name: str) -> Any:
    """``body[name]``, matched case-insensitively as Go's decoder does."""
    if name in body:
        return body[name]
    lowered = name.lower()
    for key, value in body.items():
        if key.lower() == lowered:
            return value
    return None


def node_name(node: Any) -> str:
    if not isinstance(node, dict):
        raise BadRequest("a node is not an object")
    name = (node.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise BadRequest("a node has no metadata.name")
    return name


def parse_args(body: Any) -> ExtenderArgs:
    """An ``ExtenderArgs`` from decoded JSON; ``BadRequest`` if it is not one."""
    if not isinstance(body, dict):
        raise BadRequest("ExtenderArgs must be a JSON object")
    pod = _field(body, "Pod")
    if not isinstance(pod, dict):
        raise BadRequest("ExtenderArgs.Pod is missing")
    raw_nodes = _field(body, "Nodes")
    nodes: list[dict[str, Any]] | None = None
    if raw_nodes is not None:
        items = raw_nodes.get("items") if isinstance(raw_nodes, dict) else None
        if items is None:
            items = []  # Go encodes an empty NodeList's nil Items as null
        if not isinstance(items, list):
            raise BadRequest("ExtenderArgs.Nodes.items must be a list")
        for item in items:
            node_name(item)
        nodes = items
    raw_names = _field(body, "NodeNames")
    names: list[str] | None = None
    if raw_names is not None:
        if not isinstance(raw_names, list) or not all(isinstance(n, str) for n in raw_names):
            raise BadRequest("ExtenderArgs.NodeNames must be a list of strings")
        names = raw_names
    if nodes is None and names is None:
        raise BadRequest("ExtenderArgs has neither Nodes nor NodeNames")
    return ExtenderArgs(pod, nodes, names)


@dataclass
class FilterResult:
    passed: list[str]
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)


def filter_answer(args: ExtenderArgs, result: FilterResult) -> dict[str, Any]:
    """The ``ExtenderFilterResult``: names in, names out; Node objects in, Node objects out."""
    answer: dict[str, Any] = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": result.failed,
        "FailedAndUnresolvableNodes": result.unresolvable,
        "Error": "",
    }
    if args.node_names is not None:
        answer["NodeNames"] = list(result.passed)
    else:
        keep = set(result.passed)
        items = [n for n in args.nodes or [] if node_name(n) in keep]
        answer["Nodes"] = {"metadata": {}, "items": items}
    return answer


def error_answer(message: str) -> dict[str, Any]:
    """An ``ExtenderFilterResult`` carrying only ``Error`` (for a 400 answer)."""
    return {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": None,
        "FailedAndUnresolvableNodes": None,
        "Error": message,
    }


def priority_answer(scores: dict[str, int]) -> list[dict[str, Any]]:
    """The ``HostPriorityList``, in the order of ``scores``."""
    return [{"Host": host, "Score": score} for host, score in scores.items()]
