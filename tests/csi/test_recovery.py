"""Restarts: a driver that dies leaves its mounts; a FUSE process that dies is repaired.

The pod's target path stays the same path throughout (the pod is not
recreated): after a repair, reads and writes through it work again.
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

from cloudfs_csi.csi.v1 import csi_pb2 as csi
from tests.csi.conftest import require_mounts
from tests.csi.harness import Driver, Kubelet, Mounter, fuse_pid, is_mounted, wait_until


def _readable(path: Path) -> bool:
    try:
        return (path / "train" / "0001.bin").read_bytes() == b"sample-1" * 1000
    except OSError:
        return False


def _disconnected(path: Path) -> bool:
    try:
        os.statvfs(path)  # always reaches the FUSE process; stat may hit the attribute cache
    except OSError as exc:
        return exc.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    return False


def test_driver_restart_keeps_and_readopts_mounts(
    kubelet: Kubelet, driver: Driver, data: Path
) -> None:
    ctx = {"uri": f"file://{data}"}
    staging = kubelet.stage("vol-r", ctx)
    target = kubelet.publish("vol-r", staging, ctx)
    pid = fuse_pid(staging)

    driver.stop(signal.SIGKILL)  # a crash: nothing cleaned up
    assert _readable(target)  # the pod keeps reading while the driver is away
    (target / "during").write_text("no driver")

    driver.start()
    assert fuse_pid(staging) == pid  # adopted, not restarted
    kubelet.stage("vol-r", ctx)  # kubelet's retries are answered from the adopted state
    kubelet.publish("vol-r", staging, ctx, target=target)
    second = kubelet.publish("vol-r", staging, ctx)
    assert (second / "during").read_text() == "no driver"
    kubelet.unpublish("vol-r", second)
    kubelet.unpublish("vol-r", target)
    kubelet.unstage("vol-r", staging)
    assert not staging.exists() and not target.exists()


def test_killed_fuse_process_is_restarted_and_binds_repaired(
    kubelet: Kubelet, driver: Driver, data: Path
) -> None:
    ctx = {"uri": f"file://{data}"}
    staging = kubelet.stage("vol-k", ctx, secrets={"AWS_ACCESS_KEY_ID": "AKIAKILLEDFUSE0001"})
    pod1 = kubelet.publish("vol-k", staging, ctx)
    pod2 = kubelet.publish("vol-k", staging, ctx, readonly=True)
    pid = fuse_pid(staging)

    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: _readable(pod1) and _readable(pod2), 30, "repair of both pods")
    assert fuse_pid(staging) != pid
    assert is_mounted(staging) and is_mounted(pod1) and is_mounted(pod2)
    (pod1 / "after-repair").write_text("ok")
    assert (data / "after-repair").read_text() == "ok"
    try:
        (pod2 / "nope").write_text("x")
        raise AssertionError("the read-only pod became writable after the repair")
    except OSError as exc:
        assert exc.errno == errno.EROFS
    stats = driver.node.NodeGetVolumeStats(
        csi.NodeGetVolumeStatsRequest(volume_id="vol-k", volume_path=str(pod1))
    )
    assert not stats.volume_condition.abnormal
    kubelet.unpublish("vol-k", pod1)
    kubelet.unpublish("vol-k", pod2)
    kubelet.unstage("vol-k", staging)
    assert "AKIAKILLEDFUSE0001" not in driver.log()


def test_fuse_death_while_the_driver_is_down(kubelet: Kubelet, driver: Driver, data: Path) -> None:
    ctx = {"uri": f"file://{data}"}
    staging = kubelet.stage("vol-d2", ctx)
    target = kubelet.publish("vol-d2", staging, ctx)
    driver.stop(signal.SIGKILL)
    os.kill(fuse_pid(staging), signal.SIGKILL)
    wait_until(lambda: _disconnected(target), 10, "the dead mount")

    driver.start()  # re-adopts the state, finds the dead mount, repairs it
    wait_until(lambda: _readable(target), 30, "repair after the driver restart")
    kubelet.unpublish("vol-d2", target)
    kubelet.unstage("vol-d2", staging)
    assert not target.exists() and not staging.exists()


def test_unpublish_and_unstage_of_a_dead_mount(
    kubelet: Kubelet, driver: Driver, data: Path
) -> None:
    """A pod deleted while its volume's FUSE process is dead still tears down cleanly."""
    ctx = {"uri": f"file://{data}"}
    staging = kubelet.stage("vol-x", ctx)
    target = kubelet.publish("vol-x", staging, ctx)
    driver.stop(signal.SIGKILL)
    os.kill(fuse_pid(staging), signal.SIGKILL)
    wait_until(lambda: _disconnected(target), 10, "the dead mount")
    driver.start()
    kubelet.unpublish("vol-x", target)
    kubelet.unstage("vol-x", staging)
    assert not is_mounted(target) and not is_mounted(staging)
    assert not target.exists() and not staging.exists()


def test_fuse_processes_in_the_mounter_container(base: Path, data: Path) -> None:
    """As deployed: the driver's container restarts, the mounter's keeps the mounts;
    the mounter's container restarts, its FUSE processes die and the driver repairs them."""
    require_mounts()
    (base / "node").mkdir()
    mounter = Mounter(base / "node")
    driver = Driver(base / "node", mounter=mounter)
    mounter.start()
    driver.start()
    try:
        (base / "kubelet").mkdir()
        kubelet = Kubelet(driver, base / "kubelet")
        ctx = {"uri": f"file://{data}"}
        staging = kubelet.stage("vol-m", ctx, secrets={"AWS_SECRET_ACCESS_KEY": "MOUNTERSECRET99"})
        target = kubelet.publish("vol-m", staging, ctx)
        assert "running cloudfs mount" in mounter.log()
        pid = fuse_pid(staging)
        assert (
            b"AWS_SECRET_ACCESS_KEY=MOUNTERSECRET99" in Path(f"/proc/{pid}/environ").read_bytes()
        )  # through the environment ...
        assert b"MOUNTERSECRET99" not in Path(f"/proc/{pid}/cmdline").read_bytes()  # ... not argv

        driver.stop(signal.SIGKILL)
        driver.start()
        assert _readable(target) and fuse_pid(staging) == pid

        mounter.stop(signal.SIGKILL)  # its container restarts: its processes go with it
        os.kill(pid, signal.SIGKILL)
        mounter.start()
        wait_until(lambda: _readable(target), 30, "repair through the new mounter")
        kubelet.unpublish("vol-m", target)
        kubelet.unstage("vol-m", staging)
        assert not staging.exists() and not target.exists()
        logs = driver.log() + mounter.log()
        assert "MOUNTERSECRET99" not in logs
    finally:
        driver.stop()
        mounter.stop()
