"""AdmissionReview v1 in, AdmissionReview v1 out: whether and how a pod is patched.

A review that is not an ``admission.k8s.io/v1`` AdmissionReview with a
``request.uid`` raises ``BadReview`` (the server answers 400, and the API
server applies the webhook's ``failurePolicy``). Anything but a pod being
created, a pod that did not ask (``settings.asks_for_injection``) and a pod
already injected are allowed unchanged. A pod that asked gets its sidecars
(``patch.py``) or, when it cannot (``Refused``: an unknown volume, a missing
secret, a cluster without native sidecars...), a refusal whose message says
why; with ``--on-error admit`` it is admitted as it is, with the annotation
``cloudfs.io/inject-status`` and a Warning event on its owner (none in a dry run).
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import re
import threading
from typing import Any, Protocol

from cloudfs.k8s.kube_api import KubeApiError
from cloudfs.sidecar import containers, patch, volumes
from cloudfs.sidecar.errors import Refused
from cloudfs.sidecar.settings import (
    INJECTED,
    STATUS,
    WebhookConfig,
    asks_for_injection,
    pod_settings,
)

log = logging.getLogger(__name__)

API_VERSION = "admission.k8s.io/v1"
NATIVE_SIDECARS_MINOR = 29  # SidecarContainers: beta and on by default from Kubernetes 1.29
EVENT_REASON = "CloudFSNotInjected"


class BadReview(ValueError):
    """The body is not an AdmissionReview v1 request."""


class Api(volumes.Api, Protocol):
    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]: ...


class NativeSidecars:
    """Whether the cluster runs native sidecars: from ``--native-sidecars`` or the API
    server's ``/version`` (asked once it answers; a failure is asked again next time)."""

    def __init__(self, mode: str, api: Api | None) -> None:
        self._mode = mode
        self._api = api
        self._known: bool | None = {"yes": True, "no": False}.get(mode)
        self._version = "?"
        self._lock = threading.Lock()

    def check(self) -> None:
        with self._lock:
            if self._known is None:
                self._known = self._ask()
        if not self._known:
            raise Refused(
                f"this cluster (Kubernetes {self._version}) has no native sidecars (init "
                "containers with restartPolicy: Always, on by default from 1.29): upgrade, or "
                "use the CSI node plugin",
                code=400,
            )

    def _ask(self) -> bool:
        if self._api is None:
            raise Refused("cannot tell whether the cluster has native sidecars: no API server "
                          "(start the webhook with --native-sidecars yes)", code=500)  # fmt: skip
        try:
            version = self._api.get("/version")
        except KubeApiError as exc:
            raise Refused(f"cannot read the cluster's version: {exc}", code=500) from None
        major = re.match(r"\d+", str(version.get("major", "")))
        minor = re.match(r"\d+", str(version.get("minor", "")))
        if not major or not minor:
            raise Refused(f"cannot read the cluster's version from {version!r}", code=500)
        self._version = f"{major.group()}.{minor.group()}"
        return (int(major.group()), int(minor.group())) >= (1, NATIVE_SIDECARS_MINOR)


class Webhook:
    def __init__(self, config: WebhookConfig, api: Api | None, native: NativeSidecars) -> None:
        self._config = config
        self._api = api
        self._native = native

    def review(self, body: object) -> dict[str, Any]:
        """The AdmissionReview answering ``body`` (a decoded JSON value)."""
        request = _request(body)
        uid = request["uid"]
        pod = request.get("object")
        kind = (request.get("kind") or {}).get("kind")
        if kind != "Pod" or request.get("operation") != "CREATE" or not isinstance(pod, dict):
            return _answer(uid, allowed=True)
        if not asks_for_injection(pod) or patch.already_injected(pod):
            return _answer(uid, allowed=True)
        namespace = request.get("namespace") or (pod.get("metadata") or {}).get("namespace")
        namespace = namespace if isinstance(namespace, str) and namespace else "default"
        try:
            after = self._inject(pod, namespace)
        except Refused as exc:
            return self._refused(uid, pod, namespace, exc, dry_run=bool(request.get("dryRun")))
        log.info("pod %s/%s: %s", namespace, _pod_name(pod), after["metadata"]["annotations"]
                 [INJECTED])  # fmt: skip
        return _answer(uid, allowed=True, ops=patch.json_patch(pod, after))

    def _inject(self, pod: dict[str, Any], namespace: str) -> dict[str, Any]:
        if self._api is None:
            raise Refused("the webhook has no API server to read the pod's volumes", code=500)
        self._native.check()
        settings = pod_settings(pod, self._config)
        found = volumes.resolve(pod, namespace, settings, self._api, self._config.driver)
        injection = containers.build(found, settings, self._config)
        return patch.patched(pod, found, injection)

    def _refused(
        self, uid: str, pod: dict[str, Any], namespace: str, exc: Refused, *, dry_run: bool
    ) -> dict[str, Any]:
        message = f"cloudfs sidecar: {exc}"
        log.warning("pod %s/%s: %s", namespace, _pod_name(pod), message)
        if self._config.on_error != "admit":
            return _answer(uid, allowed=False, code=exc.code, message=message)
        if not dry_run:
            self._event(pod, namespace, message)
        annotations = dict((pod.get("metadata") or {}).get("annotations") or {})
        annotations[STATUS] = f"not injected: {exc}"
        ops = [{"op": "add", "path": "/metadata/annotations", "value": annotations}]
        return _answer(uid, allowed=True, ops=ops, warning=message)

    def _event(self, pod: dict[str, Any], namespace: str, message: str) -> None:
        """A Warning event on the pod's controller (the pod has no name yet when it was made
        from a template), else on the pod; a failure is only logged."""
        metadata = pod.get("metadata") or {}
        owners = [o for o in metadata.get("ownerReferences") or [] if isinstance(o, dict)]
        owner = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
        if owner is not None:
            involved = {k: owner.get(k) for k in ("apiVersion", "kind", "name", "uid")}
        else:
            involved = {"apiVersion": "v1", "kind": "Pod", "name": _pod_name(pod)}
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": "cloudfs-sidecar-", "namespace": namespace},
            "involvedObject": {**involved, "namespace": namespace},
            "reason": EVENT_REASON,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": "cloudfs-sidecar-webhook"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            assert self._api is not None
            self._api.create(f"/api/v1/namespaces/{namespace}/events", event)
        except (KubeApiError, AssertionError) as exc:
            log.warning("cannot record the event for %s/%s: %s", namespace, _pod_name(pod), exc)


def _request(body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadReview("the body is not a JSON object")
    if body.get("apiVersion") != API_VERSION or body.get("kind") != "AdmissionReview":
        raise BadReview(f"not an AdmissionReview of {API_VERSION}")
    request = body.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise BadReview("the AdmissionReview has no request.uid")
    return request


def _answer(
    uid: str,
    *,
    allowed: bool,
    ops: list[dict[str, Any]] | None = None,
    code: int = 200,
    message: str = "",
    warning: str = "",
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
    if not allowed:
        reason = "BadRequest" if code < 500 else "InternalError"
        response["status"] = {"code": code, "message": message, "reason": reason}
    if warning:
        response["warnings"] = [warning[:512]]
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def _pod_name(pod: dict[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    return str(metadata.get("name") or (metadata.get("generateName") or "") + "*")
