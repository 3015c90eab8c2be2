"""A pod's CloudFS volumes, resolved through the API server into what each sidecar mounts.

Two kinds of pod volume are CloudFS's:

* a PVC whose bound PV is the CSI driver's (``spec.csi.driver``): the URI is the
  PV's ``volumeAttributes.uri`` or its ``volumeHandle``, the ``-o`` options its
  ``mountOptions``, the secret its ``nodeStageSecretRef``. A claim of a CloudFS
  StorageClass that is not bound yet is refused: the webhook runs before the
  scheduler, so sidecar mode needs ``volumeBindingMode: Immediate`` or a static PV;
* an inline ``csi`` volume of the driver: ``volumeAttributes.uri`` and
  ``mountOptions``, the secret its ``nodePublishSecretRef``.

A pod can only mount Secrets of its own namespace, so a volume's Secret must be
there (the annotation ``cloudfs.io/secret`` names one for every volume). The
Secret's keys decide the mount's flags (a token file, TLS files) and
environment (``AWS_*``...); its values are never read into the patch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from cloudfs.errors import FsError, UsageError
from cloudfs.k8s import csi_names
from cloudfs.k8s.kube_api import KubeApiError
from cloudfs.mount.option_names import o_items
from cloudfs.sidecar.errors import Refused
from cloudfs.sidecar.settings import SECRET, PodSettings

# Options the sidecar sets itself (paths in its container, the foreground, allow_other).
OWNED_OPTIONS = frozenset(
    {"cache_dir", "log_file", "token_file", "cache_token_file", "foreground", "staging_dir",
     "allow_other", "tls_ca", "tls_cert", "tls_key"}
)  # fmt: skip
MOUNT_OPTIONS_ATTRIBUTE = "mountOptions"  # an inline volume's -o options


class Api(Protocol):
    def get(self, path: str) -> dict[str, Any]:
        """GET a JSON object; ``KubeApiError`` (``not_found`` on 404) otherwise."""
        ...


@dataclass(frozen=True, slots=True)
class SidecarVolume:
    """One pod volume the sidecar serves."""

    index: int  # in the pod's spec.volumes
    name: str  # the pod volume's name
    source: str  # "pvc NAME (pv PV)" or "inline": for messages and the injected annotation
    uri: str
    options: tuple[str, ...] = ()
    read_only: bool = False
    secret: str | None = None  # in the pod's namespace
    secret_keys: tuple[str, ...] = ()
    cache_group: tuple[str, ...] = ()  # --cache-group NAME or --cache-peers A,B

    def option(self, name: str) -> str | None:
        """The value of ``-o name=value``, if given."""
        for item in self.options:
            key, _, value = item.partition("=")
            if key == name:
                return value
        return None


def resolve(
    pod: dict[str, Any], namespace: str, settings: PodSettings, api: Api, driver: str
) -> list[SidecarVolume]:
    """The CloudFS volumes of ``pod`` that its sidecars serve (``settings.volumes``, or
    all); ``Refused`` for a named volume that is not one, or one that cannot be served."""
    wanted = set(settings.volumes)
    found: list[SidecarVolume] = []
    names: set[str] = set()
    for index, volume in enumerate((pod.get("spec") or {}).get("volumes") or []):
        if not isinstance(volume, dict) or not isinstance(volume.get("name"), str):
            continue
        name = volume["name"]
        names.add(name)
        if wanted and name not in wanted:
            continue
        resolved = _resolve_one(index, volume, namespace, settings, api, driver, name in wanted)
        if resolved is not None:
            found.append(resolved)
    unknown = sorted(wanted - {v.name for v in found})
    if unknown:
        missing = [n for n in unknown if n not in names]
        what = "no volume of the pod" if missing else "not a CloudFS volume"
        raise Refused(f"annotation cloudfs.io/inject-volumes names {', '.join(unknown)}: {what}")
    if not found:
        raise Refused(
            "the pod asks for CloudFS (cloudfs.io/inject) but has no CloudFS volume: "
            f"a PVC bound to a {driver} PV, or an inline csi volume of {driver}"
        )
    return found


def _resolve_one(
    index: int,
    volume: dict[str, Any],
    namespace: str,
    settings: PodSettings,
    api: Api,
    driver: str,
    named: bool,
) -> SidecarVolume | None:
    name = volume["name"]
    inline = volume.get("csi")
    if isinstance(inline, dict) and inline.get("driver") == driver:
        attributes = _strings(inline.get("volumeAttributes"))
        ref = inline.get("nodePublishSecretRef") or {}
        options = attributes.get(MOUNT_OPTIONS_ATTRIBUTE, "").split(",")
        return _volume(
            index, name, "inline", attributes, options,
            read_only=bool(inline.get("readOnly")),
            secret=settings.secret or ref.get("name"),
            namespace=namespace, api=api,
        )  # fmt: skip
    claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
    if not isinstance(claim, str) or not claim:
        if named:
            raise Refused(f"volume {name}: neither a PVC nor an inline {driver} volume")
        return None
    pvc = _get(api, f"/api/v1/namespaces/{_q(namespace)}/persistentvolumeclaims/{_q(claim)}",
               f"volume {name}: PVC {namespace}/{claim}", named)  # fmt: skip
    if pvc is None:
        return None
    pvc_spec = pvc.get("spec") or {}
    pv_name = pvc_spec.get("volumeName")
    if not isinstance(pv_name, str) or not pv_name:
        _unbound(name, claim, pvc_spec.get("storageClassName"), api, driver, named)
        return None
    pv = _get(api, f"/api/v1/persistentvolumes/{_q(pv_name)}", f"volume {name}: PV {pv_name}", True)
    assert pv is not None
    pv_spec = pv.get("spec") or {}
    csi = pv_spec.get("csi") or {}
    if csi.get("driver") != driver:
        if named:
            raise Refused(f"volume {name}: PV {pv_name} is not a {driver} volume")
        return None
    attributes = _strings(csi.get("volumeAttributes"))
    handle = csi.get("volumeHandle")
    if not attributes.get(csi_names.CONTEXT_URI) and isinstance(handle, str) and "://" in handle:
        attributes[csi_names.CONTEXT_URI] = handle
    ref = csi.get("nodeStageSecretRef") or csi.get("nodePublishSecretRef") or {}
    if settings.secret is None and ref.get("name") and ref.get("namespace", namespace) != namespace:
        raise Refused(
            f"volume {name}: its Secret {ref.get('namespace')}/{ref['name']} is in another "
            f"namespace than the pod ({namespace}); copy it there and name it with the "
            f"annotation {SECRET}"
        )
    access = pvc_spec.get("accessModes") or []
    read_only = bool((volume.get("persistentVolumeClaim") or {}).get("readOnly")) or bool(
        csi.get("readOnly")
    ) or access == ["ReadOnlyMany"]  # fmt: skip
    return _volume(
        index, name, f"pvc {claim} (pv {pv_name})", attributes,
        [o for o in pv_spec.get("mountOptions") or [] if isinstance(o, str)],
        read_only=read_only, secret=settings.secret or ref.get("name"),
        namespace=namespace, api=api,
    )  # fmt: skip


def _volume(
    index: int,
    name: str,
    source: str,
    attributes: dict[str, str],
    options: list[str],
    *,
    read_only: bool,
    secret: object,
    namespace: str,
    api: Api,
) -> SidecarVolume:
    uri = attributes.get(csi_names.CONTEXT_URI, "")
    if not uri:
        raise Refused(f"volume {name} ({source}): its volume attributes name no uri")
    try:
        csi_names.check_volume_uri(uri)
        items = tuple(o_items(options, OWNED_OPTIONS))
    except (UsageError, FsError) as exc:
        raise Refused(f"volume {name} ({source}): {exc}") from None
    keys: tuple[str, ...] = ()
    secret_name = secret if isinstance(secret, str) and secret else None
    if secret_name is not None:
        found = _get(
            api, f"/api/v1/namespaces/{_q(namespace)}/secrets/{_q(secret_name)}",
            f"volume {name}: Secret {namespace}/{secret_name}", True,
        )  # fmt: skip
        assert found is not None
        keys = tuple(sorted({*(found.get("data") or {}), *(found.get("stringData") or {})}))
    group: tuple[str, ...] = ()
    if attributes.get(csi_names.CONTEXT_GROUP):
        group = ("--cache-group", attributes[csi_names.CONTEXT_GROUP])
    elif attributes.get(csi_names.CONTEXT_PEERS):
        group = ("--cache-peers", attributes[csi_names.CONTEXT_PEERS])
    return SidecarVolume(
        index=index, name=name, source=source, uri=uri, options=items,
        read_only=read_only or any(o in ("ro", "read_only") for o in items),
        secret=secret_name, secret_keys=keys, cache_group=group,
    )  # fmt: skip


def _unbound(
    name: str, claim: str, storage_class: object, api: Api, driver: str, named: bool
) -> None:
    """Refuses a claim of a CloudFS StorageClass that is not bound (and a named one of any)."""
    if isinstance(storage_class, str) and storage_class:
        path = f"/apis/storage.k8s.io/v1/storageclasses/{_q(storage_class)}"
        found = _get(api, path, f"volume {name}: StorageClass {storage_class}", named)
        if found is not None and found.get("provisioner") == driver:
            raise Refused(
                f"volume {name}: PVC {claim} is not bound yet; sidecar mode needs a bound claim "
                f"(StorageClass {storage_class} with volumeBindingMode: Immediate, or a static PV)"
            )
    if named:
        raise Refused(f"volume {name}: PVC {claim} is not bound to a {driver} PV")


def _get(api: Api, path: str, what: str, required: bool) -> dict[str, Any] | None:
    try:
        return api.get(path)
    except KubeApiError as exc:
        if exc.not_found:
            if required:
                raise Refused(f"{what} does not exist") from None
            return None
        if exc.forbidden:
            raise Refused(
                f"{what}: the webhook may not read it ({exc}); grant its service account get "
                "there (deploy/sidecar/webhook.yaml)",
                code=500,
            ) from None
        raise Refused(f"{what}: the API server did not answer ({exc})", code=500) from None


def _strings(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _q(name: str) -> str:
    return quote(name, safe="")
