"""CSI Controller service: one tree-service volume per PersistentVolume.

CreateVolume makes a volume named after the request's name (``pvc-<uid>``
as the external-provisioner sends it) on the StorageClass's tree service,
over ``ufsUri/<name>`` by default. The volume id is the volume's
``grpc://SERVER/NAME`` URI, so DeleteVolume and the nodes need nothing else.
The request's capacity and a digest of its parameters are kept in an xattr of
the volume's root: a second CreateVolume with the same name and the same
arguments answers with the same volume, one with other arguments gets
ALREADY_EXISTS.

TLS: the controller reaches every tree service with the CA (and, for mutual
TLS, the client certificate) of its ``--tls-ca-file``, ``--tls-cert-file``,
``--tls-key-file``, read at each call. The provisioner's secrets give the
token only; TLS material there is not read (one CA signs the tree services of
a cluster, docs/csi.md "TLS").
"""

from __future__ import annotations

import hashlib
import json
import logging
import os

from cloudfs.errors import AlreadyExists as FsAlreadyExists
from cloudfs.errors import FsError, NoAttribute, UsageError
from cloudfs.errors import NotFound as FsNotFound
from cloudfs.k8s.csi_names import CONTEXT_URI, TOKEN_KEYS
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.client.tree_uri import is_tree_uri, parse_tree_uri
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.meta.wire.volumes import VolumeSpec, validate_volume_name
from cloudfs.types import ROOT_INODE
from cloudfs_csi import params as sc_params
from cloudfs_csi.csi.v1 import csi_pb2 as csi
from cloudfs_csi.errors import (
    AlreadyExists,
    CsiError,
    InvalidArgument,
    NotFound,
    OutOfRange,
    from_cloudfs,
)
from cloudfs_csi.tls import TlsFiles, client_tls
from cloudfs_csi.validation import check_capability, require, require_id

log = logging.getLogger(__name__)

REQUEST_XATTR = b"user.csi.cloudfs.io.request"
TREE_TIMEOUT = 15.0
RPC = csi.ControllerServiceCapability.RPC
TLS_HINT = (
    "the controller trusts the CA of --tls-ca-file (mutual TLS: --tls-cert-file, --tls-key-file)"
)


def tree_volume_name(request_name: str) -> str:
    """The tree-service volume for a CreateVolume name (kept if valid, else a digest)."""
    try:
        validate_volume_name(request_name)
        return request_name
    except FsError:
        return "pv-" + hashlib.sha256(request_name.encode()).hexdigest()[:32]


def _token(secrets: dict[str, str]) -> str | None:
    return next((secrets[k] for k in TOKEN_KEYS if secrets.get(k)), None)


class ControllerService:
    def __init__(self, *, tree_timeout: float = TREE_TIMEOUT, tls: TlsFiles | None = None) -> None:
        """``tls``: the files of the CA and client pair the tree services are reached with
        (None, or a ``TlsFiles`` without a CA: plaintext)."""
        self._timeout = tree_timeout
        self._tls_files = tls or TlsFiles()

    def _volumes(self, address: str, token: str | None) -> VolumeClient:
        tls = client_tls(self._tls_files, "the controller (--tls-*-file)")
        return VolumeClient(address, token=token, timeout=self._timeout, tls=tls)

    def _failed(self, exc: FsError, what: str) -> CsiError:
        return from_cloudfs(exc, what, tls_hint=TLS_HINT)

    def CreateVolume(self, req: csi.CreateVolumeRequest) -> csi.CreateVolumeResponse:
        require(req.name, "name")
        require(len(req.volume_capabilities), "volume_capabilities")
        for i, cap in enumerate(req.volume_capabilities):
            check_capability(cap, f"volume_capabilities[{i}]")
        if req.HasField("volume_content_source"):
            raise InvalidArgument("volume_content_source: cloning and snapshots are not supported")
        capacity = self._capacity(req.capacity_range)
        p = sc_params.parse(dict(req.parameters))
        name = tree_volume_name(req.name)
        spec = VolumeSpec(
            name=name, ufs_uri=p.ufs_for(name), meta_ttl=p.meta_ttl, default_uid=p.uid,
            default_gid=p.gid, file_mode=p.file_mode, dir_mode=p.dir_mode,
        )  # fmt: skip
        record = json.dumps(
            {"capacity": capacity, "parameters": _digest(dict(req.parameters))}, sort_keys=True
        ).encode()
        token = _token(dict(req.secrets))
        volume_id = f"grpc://{p.server}/{name}"
        client = self._volumes(p.server, token)
        try:
            try:
                client.create(spec)
                log.info("created volume %s over %s", volume_id, spec.ufs_uri)
            except FsAlreadyExists:
                existing = client.get(name)
                if _comparable(existing) != _comparable(spec):
                    raise AlreadyExists(
                        f"volume {req.name!r} exists with other parameters"
                    ) from None
            self._check_record(p.server, name, token, record, req.name)
            _make_local_root(spec.ufs_uri)
        except FsError as exc:
            raise self._failed(exc, f"CreateVolume {req.name!r}") from None
        finally:
            client.close()
        return csi.CreateVolumeResponse(
            volume=csi.Volume(
                volume_id=volume_id,
                capacity_bytes=capacity,
                volume_context={CONTEXT_URI: volume_id, **p.context()},
            )
        )

    def _capacity(self, rng: csi.CapacityRange) -> int:
        if rng.required_bytes < 0 or rng.limit_bytes < 0:
            raise InvalidArgument("capacity_range: negative sizes")
        if rng.limit_bytes and rng.required_bytes > rng.limit_bytes:
            raise OutOfRange("capacity_range: required_bytes is above limit_bytes")
        return rng.required_bytes or rng.limit_bytes

    def _check_record(
        self, server: str, name: str, token: str | None, record: bytes, req_name: str
    ) -> None:
        """Compare with (or write, the first time) the arguments the volume was made with."""
        tls = client_tls(self._tls_files, "the controller (--tls-*-file)")
        meta = GrpcMeta(server, name, token=token, timeout=self._timeout, tls=tls)
        try:
            try:
                recorded = meta.getxattr(ROOT_INODE, REQUEST_XATTR)
            except NoAttribute:
                meta.setxattr(ROOT_INODE, REQUEST_XATTR, record)
                return
            if recorded != record:
                raise AlreadyExists(f"volume {req_name!r} exists with another capacity or class")
        finally:
            meta.close()

    def DeleteVolume(self, req: csi.DeleteVolumeRequest) -> csi.DeleteVolumeResponse:
        require_id(req.volume_id, "volume_id")
        if not is_tree_uri(req.volume_id):
            log.info("DeleteVolume %s: not a provisioned volume; nothing to delete", req.volume_id)
            return csi.DeleteVolumeResponse()
        try:
            tree = parse_tree_uri(req.volume_id)
        except (UsageError, FsError):
            return csi.DeleteVolumeResponse()  # no volume of ours can have this id
        client = self._volumes(tree.address, _token(dict(req.secrets)))
        try:
            client.delete(tree.volume)
            log.info("deleted volume %s (its UFS data is kept)", req.volume_id)
        except FsNotFound:
            pass  # deleted already: success, as the spec asks
        except FsError as exc:
            raise self._failed(exc, f"DeleteVolume {req.volume_id!r}") from None
        finally:
            client.close()
        return csi.DeleteVolumeResponse()

    def ValidateVolumeCapabilities(
        self, req: csi.ValidateVolumeCapabilitiesRequest
    ) -> csi.ValidateVolumeCapabilitiesResponse:
        require_id(req.volume_id, "volume_id")
        require(len(req.volume_capabilities), "volume_capabilities")
        self._lookup(req.volume_id, dict(req.volume_context), _token(dict(req.secrets)))
        try:
            for i, cap in enumerate(req.volume_capabilities):
                check_capability(cap, f"volume_capabilities[{i}]")
        except InvalidArgument as exc:
            return csi.ValidateVolumeCapabilitiesResponse(message=str(exc))
        return csi.ValidateVolumeCapabilitiesResponse(
            confirmed=csi.ValidateVolumeCapabilitiesResponse.Confirmed(
                volume_context=dict(req.volume_context),
                volume_capabilities=list(req.volume_capabilities),
                parameters=dict(req.parameters),
            )
        )

    def _lookup(self, volume_id: str, context: dict[str, str], token: str | None) -> None:
        """NOT_FOUND unless ``volume_id`` is a volume (provisioned, or a static UFS URI)."""
        uri = context.get(CONTEXT_URI) or volume_id
        if not is_tree_uri(volume_id):
            if "://" not in uri:
                raise NotFound(f"unknown volume {volume_id!r}")
            return
        try:
            tree = parse_tree_uri(volume_id)
        except (UsageError, FsError):
            raise NotFound(f"unknown volume {volume_id!r}") from None
        client = self._volumes(tree.address, token)
        try:
            client.get(tree.volume)
        except FsError as exc:
            raise self._failed(exc, f"volume {volume_id!r}") from None
        finally:
            client.close()

    def ControllerGetCapabilities(
        self, req: csi.ControllerGetCapabilitiesRequest
    ) -> csi.ControllerGetCapabilitiesResponse:
        caps = [RPC.CREATE_DELETE_VOLUME, RPC.SINGLE_NODE_MULTI_WRITER]
        return csi.ControllerGetCapabilitiesResponse(
            capabilities=[
                csi.ControllerServiceCapability(rpc=RPC(type=t))  # type: ignore[arg-type]
                for t in caps
            ]
        )


def _make_local_root(ufs_uri: str) -> None:
    """A file:// sub-path must exist before a mount lists it (S3 prefixes need nothing).

    file:// volumes live on a path every node, the tree service and this
    controller share (a NAS mounted at the same place).
    """
    if not ufs_uri.startswith("file://"):
        return
    path = ufs_uri[len("file://") :]
    try:
        os.makedirs(path, mode=0o755, exist_ok=True)
    except OSError as exc:
        log.warning("cannot create %s here (%s); the volume's mounts need it", path, exc.strerror)


def _comparable(spec: VolumeSpec) -> tuple[object, ...]:
    return (spec.ufs_uri, spec.meta_ttl, spec.default_uid, spec.default_gid, spec.file_mode,
            spec.dir_mode)  # fmt: skip


def _digest(parameters: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(parameters, sort_keys=True).encode()).hexdigest()[:16]
