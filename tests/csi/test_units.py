"""The driver's pure parts: redaction, option and parameter parsing, the mount table."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudfs_csi import params
from cloudfs_csi.controller import tree_volume_name
from cloudfs_csi.csi.v1 import csi_pb2 as csi
from cloudfs_csi.errors import InvalidArgument
from cloudfs_csi.fuse_process import LocalRunner
from cloudfs_csi.mounter import handle
from cloudfs_csi.mounts import MountTable
from cloudfs_csi.redact import redacted, scrub, to_log
from cloudfs_csi.state import StagedVolume, StateStore
from cloudfs_csi.validation import mount_options
from cloudfs_csi.volumes import cache_token, split_secrets, volume_uri


def test_secrets_and_mount_flag_values_are_redacted() -> None:
    req = csi.NodeStageVolumeRequest(
        volume_id="v",
        secrets={"AWS_SECRET_ACCESS_KEY": "hunter2hunter2"},
        volume_capability=csi.VolumeCapability(
            mount=csi.VolumeCapability.MountVolume(mount_flags=["cache_size=1G,ro"])
        ),
    )
    text = to_log(req)
    assert "hunter2" not in text and "1G" not in text
    assert redacted(req)["secrets"] == "***stripped***"
    assert redacted(req)["volume_capability"]["mount"]["mount_flags"] == ["cache_size=***,ro"]
    assert "hunter2" not in to_log(csi.CreateVolumeRequest(secrets={"token": "hunter2"}))
    assert scrub("auth hunter2hunter2 failed", {"k": "hunter2hunter2"}) == (
        "auth ***stripped*** failed"
    )


def test_mount_options() -> None:
    assert mount_options(["cache_size=50G,write_mode=back", "ro", "noatime"]) == [
        "cache_size=50G", "write_mode=back", "ro",
    ]  # fmt: skip
    for bad in (["cache_dir=/x"], ["nosuch=1"], ["cache_size"], ["ro=1"], ["token_file=/t"]):
        with pytest.raises(InvalidArgument):
            mount_options(bad)


def test_storage_class_parameters() -> None:
    p = params.parse({"server": "meta:7070", "ufsUri": "s3://b/pvs/", "fileMode": "0600",
                      "csi.storage.k8s.io/pv/name": "pvc-1"})  # fmt: skip
    assert p.ufs_for("pvc-1") == "s3://b/pvs/pvc-1" and p.file_mode == 0o600
    assert (
        params.parse({"server": "m:1", "ufsUri": "s3://b", "subPath": "false"}).ufs_for("x")
        == "s3://b"
    )
    for bad in (
        {"ufsUri": "s3://b"},
        {"server": "m:1"},
        {"server": "nohostport", "ufsUri": "s3://b"},
        {"server": "m:1", "ufsUri": "ftp://b"},
        {"server": "m:1", "ufsUri": "s3://b", "subPath": "maybe"},
        {"server": "m:1", "ufsUri": "s3://b", "uid": "root"},
    ):
        with pytest.raises(InvalidArgument):
            params.parse(bad)


def test_names_uris_and_secrets() -> None:
    assert tree_volume_name("pvc-0b4c3f4e-8f7e-4d0e-9a59-2f0d4a8e1c11").startswith("pvc-0b4c")
    odd = tree_volume_name("a name with spaces/and slashes")
    assert odd.startswith("pv-") and len(odd) <= 63
    assert volume_uri("s3://b/p", {}) == "s3://b/p"
    assert volume_uri("handle", {"uri": "file:///d"}) == "file:///d"
    env, token = split_secrets({"token": "t", "AWS_ACCESS_KEY_ID": "a", "other": "x"})
    assert env == {"AWS_ACCESS_KEY_ID": "a"} and token == "t"
    for key in ("cacheToken", "CLOUDFS_CACHE_TOKEN"):  # a file, not the environment
        secrets = {key: "c", "AWS_ACCESS_KEY_ID": "a"}
        assert split_secrets(secrets) == ({"AWS_ACCESS_KEY_ID": "a"}, None)
        assert cache_token(secrets) == "c"


def test_mount_table_reads_escaped_mount_points(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(
        "36 35 0:31 / /mnt/with\\040space rw,relatime shared:1 - fuse.cloudfs file:///d rw\n"
        "37 35 0:32 / /mnt/ro ro,relatime - tmpfs tmpfs ro\n"
        "38 35 0:33 / /mnt/t\\011n\\012b\\134 rw - fuse.cloudfs s3://b rw\n"
        "39 38 0:34 / /mnt/t\\011n\\012b\\134 rw - tmpfs tmpfs rw\n"
    )
    table = MountTable(str(info))
    entries = table.entries()
    assert entries["/mnt/with space"].fs_type == "fuse.cloudfs"
    assert entries["/mnt/ro"].read_only and not entries["/mnt/with space"].read_only
    top = table.entry("/mnt/t\tn\nb\\")
    assert top is not None and top.fs_type == "tmpfs", "the topmost mount at a path"
    assert entries["/mnt/with space"].source == "file:///d"


def test_state_files_are_private(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "state"))
    vol = StagedVolume(
        volume_id="v", staging_path="/s", uri="s3://b", access_mode=5, read_only=False,
        mount_flags=[], options=[], context={}, cache_dir="/c", has_token=True,
    )  # fmt: skip
    store.save(vol)
    store.save_secrets("v", {"AWS_SECRET_ACCESS_KEY": "k"}, "tok", "cache-tok")
    assert store.load_all() == [vol]
    assert store.load_env("v") == {"AWS_SECRET_ACCESS_KEY": "k"}
    cache_file = store.cache_token_file("v")
    assert cache_file is not None and Path(cache_file).read_text() == "cache-tok"
    files = [p for p in (tmp_path / "state").rglob("*") if p.is_file()]
    assert len(files) == 4 and all(p.stat().st_mode & 0o777 == 0o600 for p in files)
    assert (tmp_path / "state" / "secrets").stat().st_mode & 0o777 == 0o700
    store.save_secrets("v", {}, "tok")  # staged again without a cache token
    assert store.cache_token_file("v") is None
    store.delete("v")
    assert store.load_all() == [] and store.token_file("v") is None


def test_the_mounter_runs_only_cloudfs_mount_and_umount() -> None:
    runner = LocalRunner(["/bin/echo"])
    assert handle({"args": ["rm", "-rf", "/"]}, runner)["returncode"] == 2
    assert handle({"args": []}, runner)["returncode"] == 2
    assert handle({"args": ["mount", 1]}, runner)["returncode"] == 2
    reply = handle({"args": ["umount", "/mnt/x"], "env": {"K": "v"}}, runner)
    assert reply == {"returncode": 0, "stderr": ""}
