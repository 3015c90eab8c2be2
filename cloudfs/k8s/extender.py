"""The extender's decisions: which candidate nodes pass, and how each scores.

* ``filter``: every node passes, unless ``node_label`` is set and the
  scheduler sent whole Node objects (not ``nodeCacheCapable``): then a node
  without that label (say ``cloudfs.io/node-plugin=true``, put on the nodes
  that run the CloudFS CSI node plugin) fails with a reason. With node names
  only there is nothing to check, and every node passes.
* ``prioritize``: a node's bytes are the cached bytes of the pod's CloudFS
  volumes there (``pod_volumes.py``; summed over the volumes), as the mounts
  reported them to the tree service; its score is
  ``round(10 * bytes / most bytes on any candidate)``, 0 everywhere when no
  candidate caches anything. A tree service that cannot be asked gives every
  node 0 (a log line), so the extender never fails a pod's scheduling: the
  data's locality is a preference.
"""

from __future__ import annotations

import logging
from typing import Protocol

from cloudfs.k8s.csi_names import DRIVER_NAME
from cloudfs.k8s.pod_volumes import ClaimResolver, pod_volumes
from cloudfs.k8s.wire import MAX_EXTENDER_PRIORITY, ExtenderArgs, FilterResult, node_name

log = logging.getLogger(__name__)


class CachedBytesSource(Protocol):
    def cached_bytes(self, volume: str) -> dict[str, int]:
        """Node -> bytes of ``volume`` cached there. Raises ``FsError`` when unreachable."""
        ...


def scores_of(held: dict[str, int], candidates: list[str]) -> dict[str, int]:
    """0..10 per candidate, in proportion to the most any candidate holds."""
    most = max((held.get(n, 0) for n in candidates), default=0)
    if most <= 0:
        return dict.fromkeys(candidates, 0)
    return {n: round(MAX_EXTENDER_PRIORITY * held.get(n, 0) / most) for n in candidates}


class Extender:
    def __init__(
        self,
        cache: CachedBytesSource,
        resolver: ClaimResolver | None = None,
        *,
        driver: str = DRIVER_NAME,
        node_label: str | None = None,
    ) -> None:
        """``node_label``: ``KEY`` or ``KEY=VALUE`` a node must carry to pass ``filter``."""
        self._cache = cache
        self._resolver = resolver
        self._driver = driver
        key, _, value = (node_label or "").partition("=")
        self._label = (key, value if "=" in (node_label or "") else None) if key else None

    def filter(self, args: ExtenderArgs) -> FilterResult:
        if self._label is None or args.nodes is None:
            return FilterResult(passed=args.candidates)
        key, value = self._label
        result = FilterResult(passed=[])
        for node in args.nodes:
            labels = (node.get("metadata") or {}).get("labels") or {}
            if key in labels and (value is None or labels[key] == value):
                result.passed.append(node_name(node))
            else:
                want = key if value is None else f"{key}={value}"
                result.failed[node_name(node)] = f"no CloudFS node plugin (label {want} missing)"
        return result

    def prioritize(self, args: ExtenderArgs) -> dict[str, int]:
        candidates = args.candidates
        volumes = pod_volumes(args.pod, self._resolver, self._driver)
        held: dict[str, int] = {}
        try:
            for volume in volumes:
                for node, count in self._cache.cached_bytes(volume).items():
                    held[node] = held.get(node, 0) + count
        except Exception as exc:  # the tree service away: neutral, never a failed cycle
            log.warning("cannot ask the tree service for cached bytes (%s); scores 0", exc)
            return dict.fromkeys(candidates, 0)
        scores = scores_of(held, candidates)
        if volumes:
            log.info("pod %s: volumes %s; scores %s", _pod_name(args), volumes, scores)
        return scores


def _pod_name(args: ExtenderArgs) -> str:
    metadata = args.pod.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
