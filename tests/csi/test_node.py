"""The node service through its socket, as kubelet drives it, with real FUSE and bind mounts."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import grpc
import pytest

from cloudfs_csi.csi.v1 import csi_pb2 as csi
from tests.csi.harness import Driver, Kubelet, Mode, capability, is_mounted


def _code(exc: pytest.ExceptionInfo[grpc.RpcError]) -> grpc.StatusCode:
    return exc.value.code()  # type: ignore[no-any-return]


def test_stage_publish_read_write_unpublish_unstage(kubelet: Kubelet, data: Path) -> None:
    ctx = {"uri": f"file://{data}"}
    staging = kubelet.stage("vol-a", ctx)
    assert is_mounted(staging)
    target = kubelet.publish("vol-a", staging, ctx)
    assert is_mounted(target)
    assert sorted(os.listdir(target / "train")) == ["0001.bin", "0002.bin"]
    assert (target / "train" / "0001.bin").read_bytes() == b"sample-1" * 1000
    (target / "out").mkdir()
    (target / "out" / "ckpt.pt").write_bytes(b"weights")
    assert (data / "out" / "ckpt.pt").read_bytes() == b"weights"  # written back to the UFS

    kubelet.unpublish("vol-a", target)
    assert not target.exists()  # the driver removes the target path
    assert not is_mounted(target)
    kubelet.unstage("vol-a", staging)
    assert not staging.exists()
    assert (data / "out" / "ckpt.pt").read_bytes() == b"weights"  # the data stays


def test_repeated_calls_are_idempotent(kubelet: Kubelet, data: Path) -> None:
    ctx = {"uri": f"file://{data}"}
    staging = kubelet.stage("vol-b", ctx)
    assert kubelet.stage("vol-b", ctx) == staging
    target = kubelet.publish("vol-b", staging, ctx)
    kubelet.publish("vol-b", staging, ctx, target=target)
    assert (target / "train" / "0002.bin").exists()
    kubelet.unpublish("vol-b", target)
    kubelet.unpublish("vol-b", target)
    kubelet.unstage("vol-b", staging)
    kubelet.unstage("vol-b", staging)
    assert not target.exists() and not staging.exists()


def test_two_pods_share_one_fuse_mount(kubelet: Kubelet, data: Path) -> None:
    ctx = {"uri": f"file://{data}"}
    staging = kubelet.stage("vol-c", ctx)
    pod1 = kubelet.publish("vol-c", staging, ctx)
    pod2 = kubelet.publish("vol-c", staging, ctx)
    (pod1 / "from-pod1").write_text("hello")
    assert (pod2 / "from-pod1").read_text() == "hello"
    assert os.stat(pod1).st_dev == os.stat(pod2).st_dev == os.stat(staging).st_dev
    with pytest.raises(grpc.RpcError) as exc:  # pods still use it
        kubelet.unstage("vol-c", staging)
    assert _code(exc) == grpc.StatusCode.FAILED_PRECONDITION
    kubelet.unpublish("vol-c", pod1)
    assert (pod2 / "from-pod1").read_text() == "hello"  # the other pod keeps its mount
    kubelet.unpublish("vol-c", pod2)
    kubelet.unstage("vol-c", staging)


def test_read_only_publish_refuses_writes(kubelet: Kubelet, data: Path) -> None:
    ctx = {"uri": f"file://{data}"}
    staging = kubelet.stage("vol-d", ctx)
    rw = kubelet.publish("vol-d", staging, ctx)
    ro = kubelet.publish("vol-d", staging, ctx, readonly=True)
    assert (ro / "train" / "0001.bin").read_bytes() == b"sample-1" * 1000
    with pytest.raises(OSError) as err:
        (ro / "nope").write_text("x")
    assert err.value.errno == errno.EROFS
    (rw / "yes").write_text("x")  # the writable pod still writes
    assert (ro / "yes").read_text() == "x"
    kubelet.unpublish("vol-d", ro)
    kubelet.unpublish("vol-d", rw)
    kubelet.unstage("vol-d", staging)


def test_read_only_access_mode_mounts_fuse_read_only(kubelet: Kubelet, data: Path) -> None:
    ctx = {"uri": f"file://{data}"}
    cap = capability(Mode.MULTI_NODE_READER_ONLY)
    staging = kubelet.stage("vol-e", ctx, cap=cap)
    target = kubelet.publish("vol-e", staging, ctx, cap=cap)
    with pytest.raises(OSError) as err:
        (staging / "nope").write_text("x")
    assert err.value.errno == errno.EROFS
    with pytest.raises(OSError) as err:
        (target / "nope").write_text("x")
    assert err.value.errno == errno.EROFS
    kubelet.unpublish("vol-e", target)
    kubelet.unstage("vol-e", staging)


def test_incompatible_repeats_and_single_writer(kubelet: Kubelet, data: Path) -> None:
    ctx = {"uri": f"file://{data}"}
    staging = kubelet.stage("vol-f", ctx, cap=capability(Mode.SINGLE_NODE_SINGLE_WRITER))
    with pytest.raises(grpc.RpcError) as exc:  # same staging path, another capability
        kubelet.stage("vol-f", ctx, cap=capability(Mode.MULTI_NODE_READER_ONLY))
    assert _code(exc) == grpc.StatusCode.ALREADY_EXISTS
    cap = capability(Mode.SINGLE_NODE_SINGLE_WRITER)
    target = kubelet.publish("vol-f", staging, ctx, cap=cap)
    with pytest.raises(grpc.RpcError) as exc:  # same target, now read-only
        kubelet.publish("vol-f", staging, ctx, cap=cap, target=target, readonly=True)
    assert _code(exc) == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(grpc.RpcError) as exc:  # a second pod of a single-writer volume
        kubelet.publish("vol-f", staging, ctx, cap=cap)
    assert _code(exc) == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as exc:  # staged elsewhere
        kubelet.publish("vol-f", staging.parent, ctx, cap=cap)
    assert _code(exc) == grpc.StatusCode.FAILED_PRECONDITION
    kubelet.unpublish("vol-f", target)
    kubelet.unstage("vol-f", staging)


def test_volume_stats_and_info(kubelet: Kubelet, driver: Driver, data: Path) -> None:
    ctx = {"uri": f"file://{data}"}
    staging = kubelet.stage("vol-g", ctx)
    target = kubelet.publish("vol-g", staging, ctx)
    for path in (staging, target):
        stats = driver.node.NodeGetVolumeStats(
            csi.NodeGetVolumeStatsRequest(volume_id="vol-g", volume_path=str(path))
        )
        units = {u.unit: u for u in stats.usage}
        assert units[csi.VolumeUsage.BYTES].total > 0
        assert csi.VolumeUsage.INODES in units
        assert not stats.volume_condition.abnormal
    with pytest.raises(grpc.RpcError) as exc:
        driver.node.NodeGetVolumeStats(
            csi.NodeGetVolumeStatsRequest(volume_id="vol-g", volume_path=str(data))
        )
    assert _code(exc) == grpc.StatusCode.NOT_FOUND
    info = driver.node.NodeGetInfo(csi.NodeGetInfoRequest())
    assert info.node_id == "test-node"
    kubelet.unpublish("vol-g", target)
    kubelet.unstage("vol-g", staging)


def test_mount_options_reach_the_fuse_process(kubelet: Kubelet, data: Path) -> None:
    ctx = {"uri": f"file://{data}"}
    cap = capability(flags=["cache_size=64M,ro", "noatime"])
    staging = kubelet.stage("vol-h", ctx, cap=cap)
    with pytest.raises(OSError) as err:  # `ro` went to cloudfs mount
        (staging / "nope").write_text("x")
    assert err.value.errno == errno.EROFS
    kubelet.unstage("vol-h", staging)
    with pytest.raises(grpc.RpcError) as exc:  # the driver owns the cache directory
        kubelet.stage("vol-i", ctx, cap=capability(flags=["cache_dir=/tmp/elsewhere"]))
    assert _code(exc) == grpc.StatusCode.INVALID_ARGUMENT
