"""A volume's cache group reaching ``cloudfs mount``, through the driver's gRPC server.

The driver runs a recording stand-in for the cloudfs CLI (``fake_cloudfs.py``,
through ``--cloudfs-command``), so each test sees the exact command line the
node plugin would run, and which secret reached which token file. No FUSE
mount is made: these run without root.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cloudfs.cli.mount_options import add_arguments, apply_o_options
from cloudfs_csi.csi.v1 import csi_pb2 as csi
from cloudfs_csi.state import volume_key
from testkit.tree_server import TreeServer
from tests.csi.harness import Driver, Kubelet, Mode, capability

FAKE = Path(__file__).with_name("fake_cloudfs.py")
CACHE_TOKEN = "cache-group-token-5f0c2a"


class Recorded:
    def __init__(self, path: Path) -> None:
        self.path = path

    def mounts(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        runs = [json.loads(line) for line in self.path.read_text().splitlines()]
        return [r for r in runs if r["args"][0] == "mount"]


@pytest.fixture
def start_driver(base: Path) -> Iterator[Callable[..., tuple[Driver, Kubelet, Recorded]]]:
    drivers: list[Driver] = []

    def start(*extra: str) -> tuple[Driver, Kubelet, Recorded]:
        n = len(drivers)
        record = Recorded(base / f"runs-{n}.jsonl")
        command = shlex.join([sys.executable, str(FAKE), str(record.path)])
        driver = Driver(base / f"driver-{n}", extra_args=[
            "--cloudfs-command", command, "--health-interval", "3600", *extra,
        ])  # fmt: skip
        driver.base.mkdir()
        drivers.append(driver)
        driver.start()
        (base / f"kubelet-{n}").mkdir()
        return driver, Kubelet(driver, base / f"kubelet-{n}"), record

    yield start
    for driver in drivers:
        driver.stop()


def _expected_start(driver: Driver, uri: str, volume_id: str, staging: Path) -> list[str]:
    cache_dir = driver.base / "cache" / volume_key(volume_id)
    return ["mount", uri, str(staging), "--cache-dir", str(cache_dir),
            "--log-file", str(cache_dir / "mount.log"), "--allow-other"]  # fmt: skip


def _secret_file(driver: Driver, volume_id: str, suffix: str) -> str:
    return str(driver.base / "state" / "secrets" / f"{volume_key(volume_id)}{suffix}")


def _parses_as_cloudfs_mount(args: list[str]) -> None:
    """The real ``cloudfs mount`` parser takes the line, -o options included."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    ns = parser.parse_args(args[1:])
    apply_o_options(ns)


def _create(driver: Driver, name: str, params: dict[str, str], token: str) -> csi.Volume:
    reply = driver.controller.CreateVolume(
        csi.CreateVolumeRequest(
            name=name, volume_capabilities=[capability()], parameters=params,
            secrets={"token": token},
        ), timeout=30,
    )  # fmt: skip
    return reply.volume  # type: ignore[no-any-return]


def test_static_volume_with_cache_peers(
    start_driver: Callable[..., tuple[Driver, Kubelet, Recorded]], data: Path
) -> None:
    driver, kubelet, record = start_driver()
    uri = f"file://{data}"
    ctx = {"uri": uri, "cachePeers": "10.0.0.7:7080, 10.0.0.8:7080+10.0.0.7:7080"}
    secrets = {"cacheToken": CACHE_TOKEN, "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE"}
    staging = kubelet.stage("vol-peers", ctx, secrets=secrets)
    run = record.mounts()[0]
    token_file = _secret_file(driver, "vol-peers", ".cache-token")
    assert run["args"] == [
        *_expected_start(driver, uri, "vol-peers", staging),
        "--cache-peers", "10.0.0.7:7080,10.0.0.8:7080",  # each member once, in order
        "--cache-token-file", token_file,
    ]  # fmt: skip
    assert run["--cache-token-file"] == CACHE_TOKEN and not run["cache_token_in_env"]
    _parses_as_cloudfs_mount(run["args"])
    kubelet.unstage("vol-peers", staging)
    assert not Path(token_file).exists()  # the secret goes with the volume
    assert CACHE_TOKEN not in driver.log()


def test_provisioned_volume_with_a_cache_group(
    start_driver: Callable[..., tuple[Driver, Kubelet, Recorded]],
    tree_server: TreeServer,
    base: Path,
) -> None:
    """StorageClass parameter cacheGroup -> volume context -> --cache-group on every node."""
    driver, kubelet, record = start_driver()
    token = tree_server.token
    assert token is not None
    (base / "bucket").mkdir()
    params = {"server": tree_server.address, "ufsUri": f"file://{base}/bucket",
              "cacheGroup": "training"}  # fmt: skip
    vol = _create(driver, "pvc-cache-group-1", params, token)
    assert dict(vol.volume_context) == {"uri": vol.volume_id, "cacheGroup": "training"}
    ro = capability(Mode.MULTI_NODE_READER_ONLY, ["cache_size=50G"])
    secrets = {"token": token, "cacheToken": CACHE_TOKEN}
    staging = kubelet.stage(vol.volume_id, dict(vol.volume_context), ro, secrets)
    run = record.mounts()[0]
    assert run["args"] == [
        *_expected_start(driver, vol.volume_id, vol.volume_id, staging), "--read-only",
        "--token-file", _secret_file(driver, vol.volume_id, ".token"),
        "--cache-group", "training",
        "--cache-token-file", _secret_file(driver, vol.volume_id, ".cache-token"),
        "-o", "cache_size=50G",
    ]  # fmt: skip
    assert run["--token-file"] == token and run["--cache-token-file"] == CACHE_TOKEN
    _parses_as_cloudfs_mount(run["args"])
    log = driver.log()
    assert token not in log and CACHE_TOKEN not in log


def test_group_in_mount_options_with_the_nodes_token_file(
    start_driver: Callable[..., tuple[Driver, Kubelet, Recorded]],
    tree_server: TreeServer,
    base: Path,
) -> None:
    """mountOptions cache_group/cache_group_serve pass through; the node plugin's
    --cache-token-file stands in for a secret without cacheToken."""
    node_token = base / "node-cache-token"
    node_token.write_text(CACHE_TOKEN)
    driver, kubelet, record = start_driver("--cache-token-file", str(node_token))
    token = tree_server.token
    assert token is not None
    (base / "bucket").mkdir()
    params = {"server": tree_server.address, "ufsUri": f"file://{base}/bucket"}
    vol = _create(driver, "pvc-cache-group-2", params, token)
    flags = ["cache_group=training,cache_group_serve=10.0.0.9:7081", "cache_size=50G"]
    staging = kubelet.stage(
        vol.volume_id, dict(vol.volume_context), capability(flags=flags), {"token": token}
    )
    run = record.mounts()[0]
    assert run["args"] == [
        *_expected_start(driver, vol.volume_id, vol.volume_id, staging),
        "--token-file", _secret_file(driver, vol.volume_id, ".token"),
        "--cache-token-file", str(node_token),
        "-o", "cache_group=training,cache_group_serve=10.0.0.9:7081,cache_size=50G",
    ]  # fmt: skip
    _parses_as_cloudfs_mount(run["args"])


def test_no_group_no_cache_flags(
    start_driver: Callable[..., tuple[Driver, Kubelet, Recorded]], data: Path, base: Path
) -> None:
    """A cache token alone (a shared Secret) or the node's token file adds nothing."""
    (base / "t").write_text(CACHE_TOKEN)
    driver, kubelet, record = start_driver("--cache-token-file", str(base / "t"))
    uri = f"file://{data}"
    staging = kubelet.stage("vol-plain", {"uri": uri}, secrets={"cacheToken": CACHE_TOKEN})
    assert record.mounts()[0]["args"] == _expected_start(driver, uri, "vol-plain", staging)


@pytest.mark.parametrize(
    ("context", "flags", "secrets", "message"),
    [
        ({"cachePeers": "10.0.0.7"}, [], True, "cachePeers wants HOST:PORT"),
        ({"cachePeers": "10.0.0.7:7080,10.0.0.8:http"}, [], True, "cachePeers wants HOST:PORT"),
        ({"cachePeers": ","}, [], True, "HOST:PORT[,HOST:PORT...]"),
        ({"cacheGroup": "bad group!"}, [], True, "bad cache group name 'bad group!'"),
        ({"cacheGroup": ".hidden"}, [], True, "bad cache group name"),
        ({"cacheGroup": "training"}, [], True, "needs a tree-service volume (grpc://...)"),
        ({"cacheGroup": "g", "cachePeers": "a:1"}, [], True, "not both"),
        ({"cachePeers": "a:1"}, [], False, "no cache token"),
        ({}, ["cache_peers=10.0.0.7"], True, "'cache_peers' wants HOST:PORT[+HOST:PORT...]"),
        ({}, ["cache_group=a b"], True, "'cache_group' wants a group name"),
        ({}, ["cache_group_serve=7081"], True, "'cache_group_serve' wants HOST:PORT"),
        ({}, ["cache_token_file=/etc/t"], True, "'cache_token_file' is set by the driver"),
        ({"cachePeers": "a:1"}, ["cache_peers=b:2"], True, "both in the volume's attributes"),
    ],
)
def test_bad_cache_groups_are_invalid_argument(
    start_driver: Callable[..., tuple[Driver, Kubelet, Recorded]],
    data: Path,
    context: dict[str, str],
    flags: list[str],
    secrets: bool,
    message: str,
) -> None:
    driver, kubelet, record = start_driver()
    with pytest.raises(grpc.RpcError) as exc:
        kubelet.stage(
            "vol-bad", {"uri": f"file://{data}", **context}, capability(flags=flags),
            {"cacheToken": CACHE_TOKEN} if secrets else {},
        )  # fmt: skip
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = exc.value.details() or ""
    assert message in details and CACHE_TOKEN not in details
    assert record.mounts() == []  # nothing started
    assert CACHE_TOKEN not in driver.log()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"cacheGroup": "no/slashes"}, "bad cache group name"),
        ({"cachePeers": "10.0.0.7:99999"}, "cachePeers wants HOST:PORT"),
        ({"cacheGroup": "g", "cachePeers": "a:1"}, "not both"),
    ],
)
def test_create_volume_refuses_a_bad_cache_group(
    start_driver: Callable[..., tuple[Driver, Kubelet, Recorded]],
    params: dict[str, str],
    message: str,
) -> None:
    driver, _, _ = start_driver()
    sc = {"server": "127.0.0.1:1", "ufsUri": "s3://bucket/volumes", **params}
    with pytest.raises(grpc.RpcError) as exc:
        _create(driver, "pvc-bad-group", sc, "t")
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in (exc.value.details() or "")
