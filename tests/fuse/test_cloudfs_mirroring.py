"""Files already in the UFS show up through a fresh mount: names, sizes, mtimes, modes, bytes.

S3 directories come in three spellings (a zero-byte "dir/" marker, a prefix
implied by deeper keys, both); a local store has real directories. Owner and
modes of mirrored entries come from --uid/--gid/--file-mode/--dir-mode.
"""

from __future__ import annotations

import os
import stat
import time

import pytest

from testkit.mounts import VOLUME_PROPERTY, Backing, mounted
from tests.fuse.conftest import MountFactory

FILES: dict[str, bytes] = {
    "top.txt": b"hello from the UFS\n",
    "empty.dat": b"",
    "a/b/c/deep.bin": os.urandom(300_000),
    "a/sibling.txt": b"sibling",
    "implied/only/by/prefix.txt": b"no markers on the way here",
    "marked/inside.bin": os.urandom(5 * 1024 * 1024 + 17),  # more than one 4 MiB block
    "spaces in name/and file.txt": b"spaces",
}
EMPTY_DIRS = ["emptydir"]


def populate(backing: Backing) -> None:
    for key, data in FILES.items():
        backing.write_object(key, data)
    for d in EMPTY_DIRS:
        if backing.local_dir is not None:
            (backing.local_dir / d).mkdir()
        else:
            backing.write_object(d + "/", b"")
    if backing.s3 is not None:
        backing.write_object("marked/", b"")  # marker next to real content


def ufs_mtime_ns(backing: Backing, key: str) -> int:
    if backing.local_dir is not None:
        return (backing.local_dir / key).stat().st_mtime_ns
    assert backing.s3 is not None
    head = backing.s3.client().head_object(Bucket=backing.bucket, Key=key)
    return int(head["LastModified"].timestamp() * 1e9)


def all_dirs() -> set[str]:
    dirs = set(EMPTY_DIRS)
    for key in FILES:
        parts = key.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    return dirs


def walk(root: str) -> tuple[set[str], set[str]]:
    files, dirs = set(), set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for d in dirnames:
            dirs.add(os.path.normpath(os.path.join(rel, d)))
        for f in filenames:
            files.add(os.path.normpath(os.path.join(rel, f)))
    return files, dirs


@pytest.mark.parametrize(
    ("options", "uid", "gid", "file_mode", "dir_mode"),
    [
        ((), 0, 0, 0o644, 0o755),
        (
            ("--uid", "1234", "--gid", "2345", "--file-mode", "0640", "--dir-mode", "0750"),
            1234,
            2345,
            0o640,
            0o750,
        ),
        (("-o", "uid=4321,gid=5432,file_mode=0600,dir_mode=0700"), 4321, 5432, 0o600, 0o700),
    ],
    ids=["defaults", "flags", "o-options"],
)
def test_preexisting_tree_is_mirrored(
    backing: Backing,
    mount_factory: MountFactory,
    options: tuple[str, ...],
    uid: int,
    gid: int,
    file_mode: int,
    dir_mode: int,
) -> None:
    if backing.is_tree:
        pytest.skip(VOLUME_PROPERTY)
    populate(backing)
    with mount_factory(*options) as m:
        root = str(m.root)
        assert sorted(os.listdir(root)) == sorted(
            ["top.txt", "empty.dat", "a", "implied", "marked", "spaces in name", "emptydir"]
        )
        files, dirs = walk(root)
        assert files == set(FILES)
        assert dirs == all_dirs()
        assert os.listdir(os.path.join(root, "emptydir")) == []
        for key, data in FILES.items():
            st = os.stat(os.path.join(root, key))
            assert stat.S_ISREG(st.st_mode), key
            assert stat.S_IMODE(st.st_mode) == file_mode, (key, oct(st.st_mode))
            assert (st.st_uid, st.st_gid) == (uid, gid), key
            assert st.st_size == len(data), key
            assert st.st_nlink == 1, key
            # S3 LastModified has (at best) millisecond precision, HEAD only seconds
            tolerance = 0 if backing.local_dir is not None else 1_000_000_000
            assert abs(st.st_mtime_ns - ufs_mtime_ns(backing, key)) <= tolerance, key
            assert st.st_mtime < time.time() + 5
            with open(os.path.join(root, key), "rb") as f:
                assert f.read() == data, key
        for d in all_dirs():
            st = os.stat(os.path.join(root, d))
            assert stat.S_ISDIR(st.st_mode), d
            assert stat.S_IMODE(st.st_mode) == dir_mode, (d, oct(st.st_mode))
            assert (st.st_uid, st.st_gid) == (uid, gid), d
        # a ranged read in the middle of a multi-block file
        with open(os.path.join(root, "marked/inside.bin"), "rb") as f:
            f.seek(4 * 1024 * 1024 - 100)
            assert f.read(300) == FILES["marked/inside.bin"][4 * 1024 * 1024 - 100 :][:300]
    # mirroring alone wrote nothing to the UFS
    assert backing.keys() == set(FILES)


def test_s3_prefix_mount_shows_only_the_prefix(
    backing: Backing, mount_factory: MountFactory
) -> None:
    """s3://bucket/prefix (and file:///dir/sub) shows the keys under the prefix, prefix stripped."""
    if backing.is_tree:
        pytest.skip(VOLUME_PROPERTY)
    backing.write_object("outside.txt", b"not visible")
    backing.write_object("data/inside.txt", b"visible")
    backing.write_object("data/sub/deeper.txt", b"deeper")
    sub = Backing(
        uri=backing.uri.rstrip("/") + "/data",
        local_dir=backing.local_dir / "data" if backing.local_dir is not None else None,
        s3=backing.s3,
        bucket=backing.bucket,
    )

    with mounted(sub) as m:
        assert sorted(os.listdir(m.root)) == ["inside.txt", "sub"]
        assert (m.root / "inside.txt").read_bytes() == b"visible"
        assert (m.root / "sub" / "deeper.txt").read_bytes() == b"deeper"
        (m.root / "sub" / "new.txt").write_bytes(b"written")
    assert backing.read_object("data/sub/new.txt") == b"written"
    assert backing.keys() == {
        "outside.txt",
        "data/inside.txt",
        "data/sub/deeper.txt",
        "data/sub/new.txt",
    }
