"""The local form's pure parts: finding a path's mount, reading ``describe``, the one-volume
adapter and the feed that tells the mount what its socket's clients committed."""

from __future__ import annotations

import errno
import stat
from pathlib import Path

import pytest

from cloudfs import mountinfo
from cloudfs.client.local import MountFacts, mount_owner, split_mount_path
from cloudfs.client.options import client_options
from cloudfs.errors import FsError, InvalidArgument, NotFound, NotPermitted, UsageError
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine.kv_memory import MemoryKV
from cloudfs.meta.interface import Invalidation
from cloudfs.meta.service import changes
from cloudfs.meta.service.changes import WatchedKV
from cloudfs.meta.service.single import LOCAL_VOLUME, MountFeed, SingleVolume
from cloudfs.meta.wire.volumes import VolumeSpec
from cloudfs.tokens import TokenFile
from cloudfs.types import ROOT_INODE, InodeId
from testkit.memory_store import MemoryObjectStore

ROOT = InodeId(ROOT_INODE)


def _mount(point: str, fs_type: str = "fuse.cloudfs", uid: int = 0) -> mountinfo.Mount:
    return mountinfo.Mount(
        1, 0, 0, 50, "/", point, ("rw",), (), fs_type, "s3://b", ("rw", f"user_id={uid}")
    )


MOUNTS = [_mount("/"), _mount("/mnt", "ext4"), _mount("/mnt/data"), _mount("/mnt/data/inner")]


def test_the_deepest_cloudfs_mount_holds_a_path() -> None:
    mount, parts = split_mount_path("/mnt/data/train/x.jpg", MOUNTS[1:])
    assert (mount.mount_point, parts) == ("/mnt/data", (b"train", b"x.jpg"))
    mount, parts = split_mount_path("/mnt/data/inner", MOUNTS)
    assert (mount.mount_point, parts) == ("/mnt/data/inner", ())
    mount, parts = split_mount_path("/mnt/data/a/../inner//b/", MOUNTS)  # normalized
    assert (mount.mount_point, parts) == ("/mnt/data/inner", (b"b",))
    mount, _ = split_mount_path("/mnt/database", MOUNTS)  # a prefix of a name is not inside
    assert mount.mount_point == "/"


def test_a_path_outside_every_cloudfs_mount_is_not_found() -> None:
    with pytest.raises(NotFound, match="not under a CloudFS mount"):
        split_mount_path("/mnt/other", MOUNTS[1:])
    with pytest.raises(NotFound):
        split_mount_path("/mnt/data/../x", MOUNTS[1:])
    with pytest.raises(InvalidArgument):
        split_mount_path("relative/path", MOUNTS)


def test_the_owner_of_a_mount() -> None:
    assert mount_owner(_mount("/m", uid=1000)) == 1000
    bare = mountinfo.Mount(1, 0, 0, 50, "/", "/m", (), (), "fuse.cloudfs", "x", ("rw",))
    assert mount_owner(bare) is None


def test_a_description_is_read_or_refused() -> None:
    facts = MountFacts.from_message(
        {
            "ufs": "s3://b", "salt": "abcd", "block_size": 4194304,
            "tree_address": "unix:/run/cloudfs/x.tree", "volume": LOCAL_VOLUME,
            "s3_endpoint": None, "read_only": True, "done": True,
        }
    )  # fmt: skip
    assert (facts.salt, facts.block_size, facts.token, facts.read_only) == (
        "abcd", 4194304, None, True,
    )  # fmt: skip
    with pytest.raises(InvalidArgument):
        MountFacts.from_message({"ufs": "s3://b"})


def test_no_tree_service_is_needed_until_a_volume_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CLOUDFS_META_SERVER", raising=False)
    options = client_options()
    assert options.meta_server == ""
    with pytest.raises(UsageError, match="meta_server"):
        options.tree("imagenet")


def _tree(drop: list[Invalidation]) -> tuple[EmbeddedMeta, SingleVolume]:
    feed = MountFeed(drop.append)
    meta = EmbeddedMeta(WatchedKV(MemoryKV(), feed), MemoryObjectStore(), ttl=5.0)
    return meta, SingleVolume(meta, feed, VolumeSpec(LOCAL_VOLUME, "file:///x"))


def test_the_mount_hears_of_its_sockets_commits_not_of_its_own() -> None:
    dropped: list[Invalidation] = []
    meta, _ = _tree(dropped)
    meta.mkdir(ROOT, b"own", stat.S_IFDIR | 0o755, 0, 0)  # the mount's own call: no session
    assert dropped == []
    with changes.origin("client-session"):  # what TreeServer sets for a socket call
        made = meta.create(ROOT, b"f", stat.S_IFREG | 0o644, 0, 0)
    assert any((ROOT, b"f") in d.entries for d in dropped)
    dropped.clear()
    with changes.origin("client-session"):
        meta.commit_upload(made.inode, 3, 1, "etag-1")
    assert any(made.inode in d.inodes for d in dropped)
    meta.close()


def test_one_volume_and_no_other() -> None:
    meta, volumes = _tree([])
    assert [v.name for v in volumes.list()] == [LOCAL_VOLUME]
    assert volumes.tree(LOCAL_VOLUME) is meta
    volumes.feed(LOCAL_VOLUME).subscribe("s")
    with pytest.raises(NotFound):
        volumes.tree("imagenet")
    with pytest.raises(NotPermitted):
        volumes.create(VolumeSpec("other", "file:///y"))
    with pytest.raises(FsError) as err:
        volumes.delete(LOCAL_VOLUME)
    assert err.value.errno == errno.EPERM
    meta.close()


def test_a_descriptions_token_file_is_followed_where_readable(tmp_path: Path) -> None:
    base = {
        "ufs": "s3://b", "salt": "abcd", "block_size": 4194304,
        "tree_address": "10.0.0.5:7070", "volume": "v", "token": "now",
    }  # fmt: skip
    unseen = MountFacts.from_message({**base, "token_file": str(tmp_path / "elsewhere")})
    assert unseen.token == "now"  # another container's file: the value it had
    (tmp_path / "token").write_text("now")
    seen = MountFacts.from_message({**base, "token_file": str(tmp_path / "token")})
    assert isinstance(seen.token, TokenFile) and seen.token.current() == "now"
