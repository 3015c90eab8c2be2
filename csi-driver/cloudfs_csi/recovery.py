"""Keeping staged volumes alive: re-adoption after a driver restart, FUSE repair.

A restarted driver loads the node state (``state.py``) and checks each staged
volume against the mount table. When the FUSE process of a volume died, its
staging path answers ENOTCONN and so does every bind of it in a pod: the
binds are detached lazily, the dead FUSE mount too, ``cloudfs mount`` is
started again at the staging path with the same cache directory (so a
write-back journal is resumed) and every published target is bound again.
Pods that mount the volume with ``mountPropagation: HostToContainer`` see the
new mount at once; the pod is not recreated.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from cloudfs_csi import cache_group
from cloudfs_csi.errors import CsiError
from cloudfs_csi.fuse_process import FuseLauncher, FuseSpec
from cloudfs_csi.mounts import Health, MountTable
from cloudfs_csi.state import StagedVolume, StateStore
from cloudfs_csi.tls import TlsFiles

log = logging.getLogger(__name__)


class Repairer:
    """Brings one staged volume's mounts back to what its state says."""

    def __init__(
        self,
        table: MountTable,
        launcher: FuseLauncher,
        store: StateStore,
        cache_token_file: str | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        """``cache_token_file``: the node's cache-group token, for volumes whose secret has none;
        ``tls``: the node's TLS files, for what a volume's secret does not give."""
        self._table = table
        self._launcher = launcher
        self._store = store
        self._cache_token_file = cache_token_file
        self._tls = tls or TlsFiles()

    def fuse_spec(self, volume: StagedVolume) -> FuseSpec:
        group = cache_group.from_parameters(volume.context)  # checked when it was staged
        cache_token_file = None
        if cache_group.uses_group(group, volume.options):
            cache_token_file = (
                self._store.cache_token_file(volume.volume_id)
                if volume.has_cache_token
                else self._cache_token_file
            )
        return FuseSpec(
            uri=volume.uri,
            mount_point=volume.staging_path,
            cache_dir=volume.cache_dir,
            options=tuple(volume.options),
            read_only=volume.read_only,
            token_file=self._store.token_file(volume.volume_id) if volume.has_token else None,
            cache_group=tuple(group.args()),
            cache_token_file=cache_token_file,
            tls=self._store.tls_files(volume.volume_id).over(self._tls),
            env=self._store.load_env(volume.volume_id),
        )

    def start_fuse(self, volume: StagedVolume) -> None:
        os.makedirs(volume.staging_path, exist_ok=True)
        self._launcher.start(self.fuse_spec(volume))

    def ensure(self, volume: StagedVolume) -> bool:
        """Repair what is broken; True if anything was (the caller saves the state)."""
        changed = False
        staging = self._table.probe(volume.staging_path)
        if staging is not Health.HEALTHY:
            log.warning(
                "volume %s: staging path %s is %s; restarting its FUSE process",
                volume.volume_id, volume.staging_path, staging.value,
            )  # fmt: skip
            for target in volume.targets:
                if self._table.is_mounted(target):
                    self._table.unmount(target, lazy=True)
            if staging is Health.DISCONNECTED:
                self._launcher.detach(volume.staging_path)
            self.start_fuse(volume)
            changed = True
        for target, pub in list(volume.targets.items()):
            health = self._table.probe(target)
            if health is Health.HEALTHY:
                continue
            if health is Health.DISCONNECTED:
                self._table.unmount(target, lazy=True)
            if not os.path.isdir(os.path.dirname(target)):
                log.warning("volume %s: %s is gone (its pod too); forgetting it",
                            volume.volume_id, target)  # fmt: skip
                del volume.targets[target]
                changed = True
                continue
            os.makedirs(target, exist_ok=True)
            self._table.bind(volume.staging_path, target, read_only=pub.read_only)
            log.info("volume %s: %s bound again", volume.volume_id, target)
            changed = True
        return changed


VolumeLocks = Callable[[str], AbstractContextManager[object]]


class HealthLoop:
    """Checks every staged volume now and then every ``interval`` seconds."""

    def __init__(
        self,
        volumes: Callable[[], Iterator[StagedVolume]],
        locked: VolumeLocks,
        repair: Callable[[StagedVolume], None],
        interval: float,
    ) -> None:
        self._volumes = volumes
        self._locked = locked
        self._repair = repair
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="csi-health", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def check_all(self) -> None:
        for volume in list(self._volumes()):
            with self._locked(volume.volume_id):
                try:
                    self._repair(volume)
                except (CsiError, OSError) as exc:
                    log.error("volume %s: repair failed: %s", volume.volume_id, exc)

    def _run(self) -> None:
        while True:
            self.check_all()
            if self._stop.wait(self._interval):
                return
