"""A minimal Kubernetes API client: JSON requests with a timeout.

The extender needs two reads (a PVC, then its PV), so it speaks plain HTTPS
with the pod's service account rather than pulling in the ``kubernetes``
package. The data-readiness controller also lists, creates and applies
(server-side apply, ``application/apply-patch+yaml``) through ``request``.
In a cluster (``KUBERNETES_SERVICE_HOST`` set) it uses the mounted
service account: the token (re-read on every call, as projected tokens
rotate) and the cluster CA. Tests give a base URL of their own.

Errors: ``KubeApiError`` for anything but a 2xx with a JSON object
(``not_found`` says whether it was a 404, ``conflict`` a 409, ``forbidden`` a 403).
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cloudfs.k8s.pod_volumes import csi_volume_name

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TIMEOUT = 2.0  # seconds per request: a scheduling cycle must not wait on us
MAX_BODY = 4 << 20
APPLY_PATCH = "application/apply-patch+yaml"  # JSON is YAML


class KubeApiError(Exception):
    def __init__(
        self,
        message: str,
        *,
        not_found: bool = False,
        conflict: bool = False,
        forbidden: bool = False,
    ) -> None:
        super().__init__(message)
        self.not_found = not_found
        self.conflict = conflict
        self.forbidden = forbidden


class KubeApi:
    def __init__(
        self,
        base_url: str,
        *,
        token_file: Path | None = None,
        ca_file: Path | None = None,
        timeout: float = TIMEOUT,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._token_file = token_file
        self._timeout = timeout
        self._ssl = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None

    @classmethod
    def in_cluster(cls, env: Mapping[str, str] = os.environ) -> KubeApi | None:
        """The API server of the cluster this process runs in; None outside one."""
        host = env.get("KUBERNETES_SERVICE_HOST")
        if not host:
            return None
        port = env.get("KUBERNETES_SERVICE_PORT", "443")
        host = f"[{host}]" if ":" in host else host
        return cls(
            f"https://{host}:{port}",
            token_file=SERVICE_ACCOUNT / "token",
            ca_file=SERVICE_ACCOUNT / "ca.crt",
        )

    def get(self, path: str) -> dict[str, Any]:
        """GET ``path`` (``/api/v1/...``) as a JSON object."""
        return self.request("GET", path)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the collection ``path``; raises with ``conflict`` on 409."""
        return self.request("POST", path, body)

    def apply(
        self, path: str, body: dict[str, Any], field_manager: str, *, force: bool = True
    ) -> dict[str, Any]:
        """Server-side apply ``body`` to the object (or subresource) ``path``."""
        query = f"?fieldManager={quote(field_manager, safe='')}&force={str(force).lower()}"
        return self.request("PATCH", path + query, body, APPLY_PATCH)

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self._base + path, data=data, method=method, headers={"Accept": "application/json"}
        )
        if data is not None:
            request.add_header("Content-Type", content_type)
        if self._token_file is not None:
            token = self._token_file.read_text().strip()
            request.add_header("Authorization", f"Bearer {token}")
        what = f"{method} {path.split('?', 1)[0]}"
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._ssl) as reply:
                answer = json.loads(reply.read(MAX_BODY))
        except urllib.error.HTTPError as exc:
            raise KubeApiError(
                f"{what}: HTTP {exc.code}",
                not_found=exc.code == 404,
                conflict=exc.code == 409,
                forbidden=exc.code == 403,
            ) from None
        except (OSError, ValueError) as exc:
            raise KubeApiError(f"{what}: {exc}") from None
        if not isinstance(answer, dict):
            raise KubeApiError(f"{what}: not a JSON object")
        return answer


class ApiClaimResolver:
    """PVC -> bound PV -> its CloudFS volume, through the API server."""

    def __init__(self, api: KubeApi, driver: str) -> None:
        self._api = api
        self._driver = driver

    def claim_volume(self, namespace: str, claim: str) -> str | None:
        pvc = self._api.get(
            f"/api/v1/namespaces/{quote(namespace, safe='')}/persistentvolumeclaims/"
            f"{quote(claim, safe='')}"
        )
        pv_name = (pvc.get("spec") or {}).get("volumeName")
        if not isinstance(pv_name, str) or not pv_name:
            return None  # not bound yet: nothing cached anywhere
        pv = self._api.get(f"/api/v1/persistentvolumes/{quote(pv_name, safe='')}")
        return csi_volume_name((pv.get("spec") or {}).get("csi"), self._driver, handle=True)
