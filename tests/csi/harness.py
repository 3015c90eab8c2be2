"""The CSI driver as kubelet and csi-sanity see it: a process serving a UNIX socket.

``Driver`` runs ``python -m cloudfs_csi.main`` in node+controller mode with its
own state and cache directories, and talks to it through the generated CSI
stubs. ``Kubelet`` makes the calls kubelet makes for a pod's volume, with the
paths kubelet uses (a ``globalmount`` staging directory per volume, a
``mount`` target directory per pod).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from cloudfs import mountinfo
from cloudfs_csi.csi.v1 import csi_pb2 as csi
from cloudfs_csi.csi.v1 import csi_pb2_grpc as csi_grpc

Mode = csi.VolumeCapability.AccessMode
_pods = itertools.count()


def capability(
    mode: int = Mode.MULTI_NODE_MULTI_WRITER, flags: list[str] | None = None
) -> csi.VolumeCapability:
    return csi.VolumeCapability(
        mount=csi.VolumeCapability.MountVolume(mount_flags=flags or []),
        access_mode=Mode(mode=mode),  # type: ignore[arg-type]
    )


def _spawn(cmd: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes] | None, sig: int) -> None:
    if proc is not None and proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Mounter:
    """``cloudfs-csi --mode mounter``: the node pod's container that runs the FUSE processes."""

    base: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> Path:
        return self.base / "mounter" / "mounter.sock"

    def start(self) -> None:
        cmd = [sys.executable, "-m", "cloudfs_csi.main", "--mode", "mounter",
               "--mounter-socket", str(self.socket)]  # fmt: skip
        self.socket.unlink(missing_ok=True)
        self.proc = _spawn(cmd, self.base / "mounter.log")
        deadline = time.monotonic() + 30
        while not self.socket.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mounter did not start:\n{self.log()}")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        _stop(self.proc, sig)
        self.proc = None

    def log(self) -> str:
        path = self.base / "mounter.log"
        return path.read_text(errors="replace") if path.exists() else ""


@dataclass
class Driver:
    base: Path
    mounter: Mounter | None = None
    extra_args: list[str] = field(default_factory=list)  # after the defaults: they win
    proc: subprocess.Popen[bytes] | None = None
    channel: grpc.Channel | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.base / "driver.log"

    @property
    def socket(self) -> Path:
        return self.base / "plugin" / "csi.sock"

    def start(self) -> None:
        cmd = [
            sys.executable, "-m", "cloudfs_csi.main", "--mode", "all",
            "--endpoint", f"unix://{self.socket}", "--node-id", "test-node",
            "--state-dir", str(self.base / "state"), "--cache-root", str(self.base / "cache"),
            "--health-interval", "0.5", "--log-level", "DEBUG",
        ]  # fmt: skip
        if self.mounter is not None:
            cmd += ["--mounter-socket", str(self.mounter.socket)]
        cmd += self.extra_args
        self.proc = _spawn(cmd, self.log_path)
        self.channel = grpc.insecure_channel(f"unix://{self.socket}")
        deadline = time.monotonic() + 30
        while True:
            try:
                self.identity.Probe(csi.ProbeRequest(), timeout=2)
                return
            except grpc.RpcError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"driver did not start:\n{self.log()}") from None
                time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        _stop(self.proc, sig)
        self.proc = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def identity(self) -> csi_grpc.IdentityStub:
        return csi_grpc.IdentityStub(self.channel)  # type: ignore[no-untyped-call]

    @property
    def node(self) -> csi_grpc.NodeStub:
        return csi_grpc.NodeStub(self.channel)  # type: ignore[no-untyped-call]

    @property
    def controller(self) -> csi_grpc.ControllerStub:
        return csi_grpc.ControllerStub(self.channel)  # type: ignore[no-untyped-call]


@dataclass
class Kubelet:
    """kubelet's side of a volume's life on one node (paths as kubelet lays them out)."""

    driver: Driver
    root: Path  # stands for /var/lib/kubelet

    def staging_path(self, volume_id: str) -> Path:
        digest = abs(hash(volume_id)) % 10**12
        path = self.root / "plugins/kubernetes.io/csi/csi.cloudfs.io" / f"{digest}" / "globalmount"
        path.mkdir(parents=True, exist_ok=True)  # kubelet makes it before NodeStageVolume
        return path

    def target_path(self) -> Path:
        pod = self.root / "pods" / f"pod-{next(_pods)}" / "volumes/kubernetes.io~csi/data"
        pod.mkdir(parents=True, exist_ok=True)  # the parent exists; the driver makes the rest
        return pod / "mount"

    def stage(
        self,
        volume_id: str,
        context: dict[str, str],
        cap: csi.VolumeCapability | None = None,
        secrets: dict[str, str] | None = None,
    ) -> Path:
        staging = self.staging_path(volume_id)
        self.driver.node.NodeStageVolume(
            csi.NodeStageVolumeRequest(
                volume_id=volume_id, staging_target_path=str(staging),
                volume_capability=cap or capability(), volume_context=context,
                secrets=secrets or {},
            ), timeout=120,
        )  # fmt: skip
        return staging

    def publish(
        self,
        volume_id: str,
        staging: Path,
        context: dict[str, str],
        *,
        readonly: bool = False,
        cap: csi.VolumeCapability | None = None,
        target: Path | None = None,
    ) -> Path:
        target = target or self.target_path()
        self.driver.node.NodePublishVolume(
            csi.NodePublishVolumeRequest(
                volume_id=volume_id, staging_target_path=str(staging), target_path=str(target),
                volume_capability=cap or capability(), readonly=readonly,
                volume_context=context,
            ), timeout=120,
        )  # fmt: skip
        return target

    def unpublish(self, volume_id: str, target: Path) -> None:
        self.driver.node.NodeUnpublishVolume(
            csi.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=str(target)),
            timeout=120,
        )

    def unstage(self, volume_id: str, staging: Path) -> None:
        self.driver.node.NodeUnstageVolume(
            csi.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=str(staging)),
            timeout=180,
        )


def mounted_under(root: Path) -> list[str]:
    """Mount points at or below ``root``, deepest first."""
    real = os.path.realpath(root)
    points = []
    for mount in mountinfo.read():
        point = mount.mount_point
        if point == real or point.startswith(real + "/"):
            points.append(point)
    return sorted(points, key=len, reverse=True)


def is_mounted(path: Path) -> bool:
    return str(path) in mounted_under(path) and os.path.realpath(path) in mounted_under(path)


def force_unmount_all(root: Path) -> None:
    """Last resort for a fixture: lazily detach every mount below ``root``."""
    for point in mounted_under(root):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=30)


def fuse_pid(staging: Path) -> int:
    from cloudfs.mount import runtime

    pid = runtime.read_pid(os.path.realpath(staging))
    assert pid is not None, f"no pid file for {staging}"
    return pid


def wait_until(predicate: object, timeout: float = 30.0, what: str = "condition") -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.1)
