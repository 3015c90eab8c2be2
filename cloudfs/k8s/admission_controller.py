"""The data-readiness controller loop: Kueue Workloads in, admission-check states out.

Every ``interval`` seconds (a level-triggered poll: a list of Workloads is one
request, and every step is idempotent, so no watch stream to keep alive):

1. list the AdmissionChecks, keep those whose ``controllerName`` is ours, and
   set their ``Active=True`` condition (Kueue holds a ClusterQueue inactive
   until its checks are Active);
2. list the Workloads of every namespace; for each with quota reserved and
   one of our checks Pending, gather a ``Readiness`` (its CloudFS volumes from
   its pod templates, their declared sizes, which volumes the tree service
   knows, the nodes of the assigned ResourceFlavors, the cached bytes the
   mounts report) and ask ``admission.decide``;
3. create the warm-up Jobs on the chosen nodes (``warmup_job.py``) and apply
   our entry of the Workload's ``status.admissionChecks`` (server-side apply
   on the status subresource, field manager ``cloudfs-data-readiness``, as
   Kueue's own controllers do).

Every API call times out (``KubeApi``, 2 s by default), every tree-service
call too; an error skips that Workload until the next pass, logged.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol
from urllib.parse import quote, urlencode

from cloudfs.k8s import admission
from cloudfs.k8s.admission import KUEUE_GROUP, KUEUE_VERSION, Decision, Readiness
from cloudfs.k8s.csi_names import DRIVER_NAME
from cloudfs.k8s.dataset_sizes import dataset_bytes
from cloudfs.k8s.kube_api import KubeApi, KubeApiError
from cloudfs.k8s.pod_volumes import ClaimResolver, pod_volumes
from cloudfs.k8s.warmup_job import warmup_job, workload_claims

log = logging.getLogger(__name__)

KUEUE = f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}"
DEFAULT_INTERVAL = 10.0


class TreeView(Protocol):
    def cached_bytes(self, volume: str) -> dict[str, int]:
        """Node -> bytes of ``volume`` cached there. Raises ``FsError`` when unreachable."""
        ...

    def volume_exists(self, volume: str) -> bool:
        """Whether the tree service has ``volume``. Raises ``FsError`` when unreachable."""
        ...


def _q(name: str) -> str:
    return quote(name, safe="")


class AdmissionController:
    def __init__(
        self,
        api: KubeApi,
        tree: TreeView,
        *,
        image: str,
        resolver: ClaimResolver | None = None,
        controller_name: str = admission.CONTROLLER_NAME,
        default_sizes: dict[str, int] | None = None,
        default_fraction: float = admission.DEFAULT_READY_FRACTION,
        driver: str = DRIVER_NAME,
    ) -> None:
        self._api = api
        self._tree = tree
        self._image = image
        self._resolver = resolver
        self._controller = controller_name
        self._sizes = default_sizes or {}
        self._fraction = default_fraction
        self._driver = driver

    def run(self, stop: threading.Event, interval: float = DEFAULT_INTERVAL) -> None:
        while not stop.is_set():
            try:
                self.reconcile_once()
            except Exception:  # one bad pass must not end the controller
                log.exception("reconcile pass failed")
            stop.wait(interval)

    def reconcile_once(self) -> dict[str, Decision]:
        """One pass; returns ``namespace/name`` -> decision for the Workloads acted on."""
        checks = self.our_checks()
        decisions: dict[str, Decision] = {}
        if not checks:
            return decisions
        for workload in self._api.get(f"{KUEUE}/workloads").get("items") or []:
            for check in checks:
                if not admission.needs_us(workload, check):
                    continue
                key = _key(workload)
                try:
                    decisions[key] = self.reconcile_workload(workload, check)
                except Exception as exc:
                    log.warning("workload %s: %s (next pass retries)", key, exc)
        return decisions

    def our_checks(self) -> list[str]:
        """Our AdmissionChecks' names, each marked Active."""
        names = []
        for check in self._api.get(f"{KUEUE}/admissionchecks").get("items") or []:
            if not admission.is_ours(check, self._controller):
                continue
            name = (check.get("metadata") or {}).get("name", "")
            names.append(name)
            if body := admission.active_patch(check):
                path = f"{KUEUE}/admissionchecks/{_q(name)}/status"
                self._api.apply(path, body, admission.FIELD_MANAGER)
        return names

    def reconcile_workload(self, workload: dict[str, Any], check: str) -> Decision:
        decision = admission.decide(workload, check, self.readiness(workload), self._fraction)
        if decision.action is admission.Action.WARM:
            self._warm(workload, decision.nodes)
        if body := admission.status_patch(workload, check, decision):
            metadata = workload.get("metadata") or {}
            path = (
                f"{KUEUE}/namespaces/{_q(metadata.get('namespace', ''))}/workloads/"
                f"{_q(metadata.get('name', ''))}/status"
            )
            self._api.apply(path, body, admission.FIELD_MANAGER)
            log.info("workload %s: %s (%s)", _key(workload), decision.state, decision.message)
        return decision

    def readiness(self, workload: dict[str, Any]) -> Readiness:
        volumes = self.volumes(workload)
        missing = frozenset(v for v in volumes if not self._tree.volume_exists(v))
        present = [v for v in volumes if v not in missing]
        return Readiness(
            dataset_bytes=dataset_bytes(workload, present, self._sizes),
            cached={v: self._tree.cached_bytes(v) for v in present},
            eligible=self.eligible_nodes(workload),
            missing=missing,
        )

    def volumes(self, workload: dict[str, Any]) -> list[str]:
        """The CloudFS volumes of the Workload's pod templates (``pod_volumes``'s rules;
        the Workload's own annotations count too)."""
        metadata = workload.get("metadata") or {}
        found: list[str] = []
        for podset in (workload.get("spec") or {}).get("podSets") or []:
            template = (podset or {}).get("template") or {}
            annotations = {
                **(metadata.get("annotations") or {}),
                **((template.get("metadata") or {}).get("annotations") or {}),
            }
            pod = {
                "metadata": {"namespace": metadata.get("namespace"), "annotations": annotations},
                "spec": template.get("spec") or {},
            }
            found += pod_volumes(pod, self._resolver, self._driver)
        return list(dict.fromkeys(found))

    def eligible_nodes(self, workload: dict[str, Any]) -> list[str]:
        """Nodes carrying the ``nodeLabels`` of an assigned ResourceFlavor (any flavor
        without labels: every node), schedulable ones only."""
        selectors: list[str | None] = []
        for flavor in admission.assigned_flavors(workload):
            spec = self._api.get(f"{KUEUE}/resourceflavors/{_q(flavor)}").get("spec") or {}
            labels = spec.get("nodeLabels") or {}
            selectors.append(",".join(f"{k}={v}" for k, v in sorted(labels.items())) or None)
        nodes: list[str] = []
        for selector in selectors or [None]:
            query = f"?{urlencode({'labelSelector': selector})}" if selector else ""
            for node in self._api.get(f"/api/v1/nodes{query}").get("items") or []:
                if not (node.get("spec") or {}).get("unschedulable"):
                    nodes.append((node.get("metadata") or {}).get("name", ""))
        return list(dict.fromkeys(n for n in nodes if n))

    def _warm(self, workload: dict[str, Any], nodes: list[str]) -> None:
        claims = workload_claims(workload)
        if not claims:
            log.info("workload %s: no PVCs to warm through; waiting on reports", _key(workload))
            return
        namespace = (workload.get("metadata") or {}).get("namespace", "default")
        for node in nodes:
            job = warmup_job(workload, node, claims, self._image)
            try:
                self._api.create(f"/apis/batch/v1/namespaces/{_q(namespace)}/jobs", job)
                log.info("workload %s: warming on %s", _key(workload), node)
            except KubeApiError as exc:
                if not exc.conflict:  # 409: already warming there
                    raise


def _key(workload: dict[str, Any]) -> str:
    metadata = workload.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
