"""CSI Node service: one FUSE mount per volume at its staging path, bind mounts into pods.

NodeStageVolume starts ``cloudfs mount`` at the staging path (read-only for a
read-only access mode); NodePublishVolume binds the staging path at the pod's
target path (read-only when asked); the unpublish and unstage calls undo
that and remove the paths. Calls on one volume are serialised; every change is
written to the node state before the call returns, so a restarted driver
knows what it has (``recovery.py``).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from cloudfs_csi import cache_group, tls
from cloudfs_csi.csi.v1 import csi_pb2 as csi
from cloudfs_csi.errors import (
    AlreadyExists,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
)
from cloudfs_csi.fuse_process import FuseLauncher
from cloudfs_csi.mounts import Health, MountTable
from cloudfs_csi.recovery import Repairer
from cloudfs_csi.state import Publication, StagedVolume, StateStore, volume_key
from cloudfs_csi.validation import (
    Mode,
    is_read_only_mode,
    mount_options,
    require_capability,
    require_id,
    require_path,
)
from cloudfs_csi.volumes import cache_token, check_exists, split_secrets, volume_uri

log = logging.getLogger(__name__)

NodeRPC = csi.NodeServiceCapability.RPC


class NodeService:
    def __init__(
        self,
        *,
        node_id: str,
        store: StateStore,
        table: MountTable,
        launcher: FuseLauncher,
        cache_root: str,
        max_volumes: int = 0,
        cache_token_file: str | None = None,
        tls_files: tls.TlsFiles | None = None,
    ) -> None:
        """``cache_token_file``: the cache-group token as the mount processes see it (the
        mounter's path), for volumes with a group whose node-stage secret has no cacheToken;
        ``tls_files``: the CA and client pair (mounter's paths) for what a secret lacks."""
        self._node_id = node_id
        self._store = store
        self._table = table
        self._launcher = launcher
        self._cache_root = cache_root
        self._max_volumes = max_volumes
        self._repairer = Repairer(table, launcher, store, cache_token_file, tls_files)
        self._tls_files = tls_files or tls.TlsFiles()
        self._has_node_cache_token = cache_token_file is not None
        self._volumes: dict[str, StagedVolume] = {v.volume_id: v for v in store.load_all()}
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    # ---- locking, state, repair ----

    @contextmanager
    def locked(self, volume_id: str) -> Iterator[object]:
        with self._guard:
            lock = self._locks.setdefault(volume_id, threading.Lock())
        with lock:
            yield lock

    def staged(self) -> Iterator[StagedVolume]:
        with self._guard:
            volumes = list(self._volumes.values())
        yield from volumes

    def repair(self, volume: StagedVolume) -> None:
        """Called with the volume's lock held (the health loop, the calls below)."""
        with self._guard:
            if self._volumes.get(volume.volume_id) is not volume:
                return  # unstaged meanwhile
        if self._repairer.ensure(volume):
            self._store.save(volume)

    def _put(self, volume: StagedVolume) -> None:
        self._store.save(volume)
        with self._guard:
            self._volumes[volume.volume_id] = volume

    def _drop(self, volume_id: str) -> None:
        self._store.delete(volume_id)
        with self._guard:
            self._volumes.pop(volume_id, None)

    def _get(self, volume_id: str) -> StagedVolume | None:
        with self._guard:
            return self._volumes.get(volume_id)

    # ---- stage ----

    def NodeStageVolume(self, req: csi.NodeStageVolumeRequest) -> csi.NodeStageVolumeResponse:
        require_id(req.volume_id, "volume_id")
        staging = require_path(req.staging_target_path, "staging_target_path")
        cap = req.volume_capability
        require_capability(cap, req.HasField("volume_capability"), "volume_capability")
        flags = list(cap.mount.mount_flags)
        with self.locked(req.volume_id):
            existing = self._get(req.volume_id)
            if existing is not None:
                if existing.staging_path != staging:
                    raise FailedPrecondition(
                        f"volume {req.volume_id!r} is staged at {existing.staging_path}"
                    )
                if (existing.access_mode, existing.mount_flags) != (cap.access_mode.mode, flags):
                    raise AlreadyExists(
                        f"volume {req.volume_id!r} is staged at {staging} with another capability"
                    )
                self.repair(existing)
                return csi.NodeStageVolumeResponse()
            context = dict(req.volume_context)
            uri = volume_uri(req.volume_id, context)
            options = mount_options(flags)
            group = cache_group.for_volume(req.volume_id, uri, context, options)
            env, token = split_secrets(dict(req.secrets))
            group_token = cache_token(dict(req.secrets))
            tls_material = tls.from_secrets(dict(req.secrets))
            cache_group.check_serve_tls(
                req.volume_id, options, has_ca=bool(tls_material.get(tls.CA) or self._tls_files.ca)
            )
            if cache_group.uses_group(group, options) and not (
                group_token or self._has_node_cache_token
            ):
                raise InvalidArgument(
                    f"volume {req.volume_id!r} has a cache group but no cache token: put "
                    "cacheToken in its node-stage secret, or start the node plugin with "
                    "--cache-token-file"
                )
            # The secret's TLS files first: the volume check uses what the mount will.
            self._store.save_secrets(req.volume_id, env, token, group_token, tls_material)
            try:
                mount_tls = self._store.tls_files(req.volume_id).over(self._tls_files)
                check_exists(req.volume_id, uri, token, mount_tls)
            except BaseException:
                self._store.delete(req.volume_id)
                raise
            volume = StagedVolume(
                volume_id=req.volume_id,
                staging_path=staging,
                uri=uri,
                access_mode=cap.access_mode.mode,
                read_only=is_read_only_mode(cap),
                mount_flags=flags,
                options=options,
                context=context,
                cache_dir=os.path.join(self._cache_root, volume_key(req.volume_id)),
                has_token=token is not None,
                has_cache_token=group_token is not None,
            )
            entry = self._table.entry(staging)
            if entry is not None and entry.fs_type == "fuse.cloudfs":
                # Mounted by an earlier driver that lost its state: adopt it.
                log.info("volume %s: adopting the CloudFS mount at %s", req.volume_id, staging)
                self._put(volume)
                self.repair(volume)
                return csi.NodeStageVolumeResponse()
            if entry is not None:
                raise FailedPrecondition(f"{staging} is already a {entry.fs_type} mount")
            try:
                self._repairer.start_fuse(volume)
            except BaseException:
                self._store.delete(req.volume_id)
                raise
            self._put(volume)
            log.info("volume %s: staged at %s (%s)", req.volume_id, staging, uri)
        return csi.NodeStageVolumeResponse()

    def NodeUnstageVolume(self, req: csi.NodeUnstageVolumeRequest) -> csi.NodeUnstageVolumeResponse:
        require_id(req.volume_id, "volume_id")
        staging = require_path(req.staging_target_path, "staging_target_path")
        with self.locked(req.volume_id):
            volume = self._get(req.volume_id)
            if volume is not None and volume.staging_path == staging:
                live = [t for t in volume.targets if self._table.is_mounted(t)]
                if live:
                    raise FailedPrecondition(
                        f"volume {req.volume_id!r} is still published at {', '.join(live)}"
                    )
            health = self._table.probe(staging)
            if health is Health.DISCONNECTED:
                self._launcher.detach(staging)
            elif health is Health.HEALTHY:
                self._launcher.stop(staging)
            if self._table.is_mounted(staging):
                raise Internal(f"{staging} is still mounted")
            _remove_dir(staging)
            if volume is not None and volume.staging_path == staging:
                self._drop(req.volume_id)
                log.info("volume %s: unstaged from %s", req.volume_id, staging)
        return csi.NodeUnstageVolumeResponse()

    # ---- publish ----

    def NodePublishVolume(self, req: csi.NodePublishVolumeRequest) -> csi.NodePublishVolumeResponse:
        require_id(req.volume_id, "volume_id")
        staging = require_path(req.staging_target_path, "staging_target_path")
        target = require_path(req.target_path, "target_path")
        cap = req.volume_capability
        require_capability(cap, req.HasField("volume_capability"), "volume_capability")
        with self.locked(req.volume_id):
            volume = self._get(req.volume_id)
            if volume is None:
                raise NotFound(f"volume {req.volume_id!r} is not staged on this node")
            if volume.staging_path != staging:
                raise FailedPrecondition(
                    f"volume {req.volume_id!r} is staged at {volume.staging_path}, not {staging}"
                )
            pub = Publication(
                target_path=target,
                read_only=req.readonly or volume.read_only or is_read_only_mode(cap),
                access_mode=cap.access_mode.mode,
                mount_flags=list(cap.mount.mount_flags),
            )
            existing = volume.targets.get(target)
            if existing is not None and existing != pub:
                raise AlreadyExists(f"{target} is published with other arguments")
            others = [t for t in volume.targets if t != target]
            if others and cap.access_mode.mode == Mode.SINGLE_NODE_SINGLE_WRITER:
                raise FailedPrecondition(
                    f"volume {req.volume_id!r} (single writer) is published at {others[0]}"
                )
            self.repair(volume)  # a dead FUSE process is restarted first
            if existing is not None and self._table.probe(target) is Health.HEALTHY:
                return csi.NodePublishVolumeResponse()
            if self._table.is_mounted(target):
                entry = self._table.entry(target)
                if entry is not None and entry.fs_type == "fuse.cloudfs":
                    self._table.unmount(target, lazy=True)  # ours, from a lost state: redo
                else:
                    raise AlreadyExists(f"{target} is already a mount point")
            os.makedirs(target, exist_ok=True)
            self._table.bind(staging, target, read_only=pub.read_only)
            volume.targets[target] = pub
            self._store.save(volume)
            log.info("volume %s: published at %s%s", req.volume_id, target,
                     " (read-only)" if pub.read_only else "")  # fmt: skip
        return csi.NodePublishVolumeResponse()

    def NodeUnpublishVolume(
        self, req: csi.NodeUnpublishVolumeRequest
    ) -> csi.NodeUnpublishVolumeResponse:
        require_id(req.volume_id, "volume_id")
        target = require_path(req.target_path, "target_path")
        with self.locked(req.volume_id):
            health = self._table.probe(target)
            if health is not Health.NOT_MOUNTED:
                self._table.unmount(target, lazy=health is Health.DISCONNECTED)
            if self._table.is_mounted(target):
                raise Internal(f"{target} is still mounted")
            _remove_dir(target)
            volume = self._get(req.volume_id)
            if volume is not None and volume.targets.pop(target, None) is not None:
                self._store.save(volume)
                log.info("volume %s: unpublished from %s", req.volume_id, target)
        return csi.NodeUnpublishVolumeResponse()

    # ---- information ----

    def NodeGetVolumeStats(
        self, req: csi.NodeGetVolumeStatsRequest
    ) -> csi.NodeGetVolumeStatsResponse:
        require_id(req.volume_id, "volume_id")
        path = require_path(req.volume_path, "volume_path")
        volume = self._get(req.volume_id)
        if volume is None:
            raise NotFound(f"volume {req.volume_id!r} is not staged on this node")
        if path != volume.staging_path and path not in volume.targets:
            raise NotFound(f"volume {req.volume_id!r} is not at {path}")
        health = self._table.probe(path)
        if health is Health.NOT_MOUNTED:
            raise NotFound(f"volume {req.volume_id!r} is not mounted at {path}")
        if health is Health.DISCONNECTED:
            return csi.NodeGetVolumeStatsResponse(
                volume_condition=csi.VolumeCondition(
                    abnormal=True,
                    message="the FUSE process is gone (transport endpoint is not connected); "
                    "the driver restarts it",
                )
            )
        st = os.statvfs(path)
        return csi.NodeGetVolumeStatsResponse(
            usage=[
                csi.VolumeUsage(
                    unit=csi.VolumeUsage.BYTES,
                    total=st.f_blocks * st.f_frsize,
                    available=st.f_bavail * st.f_frsize,
                    used=max(st.f_blocks - st.f_bfree, 0) * st.f_frsize,
                ),
                csi.VolumeUsage(
                    unit=csi.VolumeUsage.INODES,
                    total=st.f_files,
                    available=st.f_favail,
                    used=max(st.f_files - st.f_ffree, 0),
                ),
            ],
            volume_condition=csi.VolumeCondition(abnormal=False, message="mounted"),
        )

    def NodeGetCapabilities(
        self, req: csi.NodeGetCapabilitiesRequest
    ) -> csi.NodeGetCapabilitiesResponse:
        types = [
            NodeRPC.STAGE_UNSTAGE_VOLUME,
            NodeRPC.GET_VOLUME_STATS,
            NodeRPC.VOLUME_CONDITION,
            NodeRPC.SINGLE_NODE_MULTI_WRITER,
        ]
        return csi.NodeGetCapabilitiesResponse(
            capabilities=[
                csi.NodeServiceCapability(rpc=NodeRPC(type=t))  # type: ignore[arg-type]
                for t in types
            ]
        )

    def NodeGetInfo(self, req: csi.NodeGetInfoRequest) -> csi.NodeGetInfoResponse:
        return csi.NodeGetInfoResponse(
            node_id=self._node_id, max_volumes_per_node=self._max_volumes
        )


def _remove_dir(path: str) -> None:
    """Remove the (unmounted) directory or file the CO named; never anything inside it."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except NotADirectoryError:
        os.unlink(path)
    except OSError as exc:
        if exc.errno != errno.ENOTEMPTY:
            raise Internal(f"cannot remove {path}: {exc.strerror}") from None
        log.warning("%s is not empty after unmount; left in place", path)
