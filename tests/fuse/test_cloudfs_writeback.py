"""After unmount the UFS holds exactly what was written through the mount, byte for byte."""

from __future__ import annotations

import os
import random

import pytest

from testkit.mounts import Backing
from tests.fuse.conftest import MountFactory

MiB = 1024 * 1024


# Write-back with an upload delay: renames, unlinks and rewrites meet files that
# are still waiting in the journal; unmount (cloudfs umount) drains the rest.
WRITE_MODES = {"through": (), "back": ("--write-mode", "back", "--upload-delay", "1")}


@pytest.mark.parametrize("mode", WRITE_MODES)
def test_ufs_matches_what_was_written(
    backing: Backing, mount_factory: MountFactory, mode: str
) -> None:
    rng = random.Random(1234)
    pre = {
        "keep.txt": b"untouched\n",
        "cow.bin": rng.randbytes(MiB + 333),
        "trunc.bin": rng.randbytes(3 * MiB),
        "grow.bin": b"short",
        "over.txt": b"the old contents, long ones" * 100,
        "gone.txt": b"to be deleted",
        "old/name.txt": b"renamed file",
        "olddir/f1.txt": b"f1",
        "olddir/sub/f2.bin": rng.randbytes(70_000),
    }
    for key, data in pre.items():
        backing.write_object(key, data)
    expected = dict(pre)

    with mount_factory(*WRITE_MODES[mode]) as m:
        root = m.root
        # new nested directories and files of several sizes
        (root / "n1/n2/n3").mkdir(parents=True)
        sizes = {"zero": 0, "one": 1, "page": 4095, "odd": 65537, "big": 5 * MiB + 3}
        for name, size in sizes.items():
            data = rng.randbytes(size)
            (root / "n1/n2/n3" / f"{name}.bin").write_bytes(data)
            expected[f"n1/n2/n3/{name}.bin"] = data
        # a file written in several writes, some of them overlapping
        with open(root / "n1/pieces.bin", "wb") as f:
            f.write(b"a" * 10_000)
            f.seek(5_000)
            f.write(b"b" * 10_000)
            f.seek(30_000)
            f.write(b"c")
        expected["n1/pieces.bin"] = b"a" * 5_000 + b"b" * 10_000 + b"\0" * 15_000 + b"c"

        # rename: new file, UFS file into a new directory, a whole UFS directory
        os.rename(root / "n1/n2/n3/one.bin", root / "n1/one-renamed.bin")
        expected["n1/one-renamed.bin"] = expected.pop("n1/n2/n3/one.bin")
        (root / "new").mkdir()
        os.rename(root / "old/name.txt", root / "new/name.txt")
        expected["new/name.txt"] = expected.pop("old/name.txt")
        os.rename(root / "olddir", root / "movedir")
        for key in ("olddir/f1.txt", "olddir/sub/f2.bin"):
            expected["movedir/" + key.split("/", 1)[1]] = expected.pop(key)

        # delete: a UFS file and a new file
        os.unlink(root / "gone.txt")
        del expected["gone.txt"]
        os.unlink(root / "n1/n2/n3/page.bin")
        del expected["n1/n2/n3/page.bin"]

        # overwrite a UFS file (O_TRUNC) with something shorter
        (root / "over.txt").write_bytes(b"new and short")
        expected["over.txt"] = b"new and short"

        # random pwrites into an existing UFS file: copy-on-write of the object
        cow = bytearray(pre["cow.bin"])
        fd = os.open(root / "cow.bin", os.O_RDWR)
        try:
            for _ in range(20):
                off = rng.randrange(0, len(cow) + 1000)
                patch = rng.randbytes(rng.randrange(1, 5000))
                os.pwrite(fd, patch, off)
                if off > len(cow):
                    cow.extend(b"\0" * (off - len(cow)))
                cow[off : off + len(patch)] = patch
        finally:
            os.close(fd)
        expected["cow.bin"] = bytes(cow)

        # truncate UFS files: shorter, and longer (a hole of zeros)
        os.truncate(root / "trunc.bin", 1000)
        expected["trunc.bin"] = pre["trunc.bin"][:1000]
        os.truncate(root / "grow.bin", 100_000)
        expected["grow.bin"] = b"short" + b"\0" * (100_000 - 5)

        # while still mounted, the mount reads back what it wrote
        for key, data in expected.items():
            assert (root / key).read_bytes() == data, key

    assert backing.keys() == set(expected)
    for key, data in expected.items():
        got = backing.read_object(key)
        assert len(got) == len(data), key
        assert got == data, key


@pytest.mark.parametrize("mode", WRITE_MODES)
def test_writes_survive_remount(backing: Backing, mount_factory: MountFactory, mode: str) -> None:
    data = os.urandom(2 * MiB + 5)
    with mount_factory(*WRITE_MODES[mode]) as m:
        (m.root / "d").mkdir()
        (m.root / "d/f.bin").write_bytes(data)
        m.restart()
        assert (m.root / "d/f.bin").read_bytes() == data
        with open(m.root / "d/f.bin", "r+b") as f:
            f.seek(MiB)
            f.write(b"X" * 10)
    expected = data[:MiB] + b"X" * 10 + data[MiB + 10 :]
    assert backing.keys() == {"d/f.bin"}
    assert backing.read_object("d/f.bin") == expected


@pytest.mark.slow
@pytest.mark.parametrize("backing", ["s3"], indirect=True)
def test_multipart_upload_of_a_70mib_file(backing: Backing, mount_factory: MountFactory) -> None:
    """Above the 64 MiB multipart threshold the upload is multipart and arrives intact."""
    chunk = os.urandom(MiB)
    # distinct 1 MiB pieces: a misplaced part cannot compare equal by accident
    data = b"".join(i.to_bytes(4, "big") + chunk[4:] for i in range(70))
    with mount_factory() as m, open(m.root / "huge.bin", "wb") as f:
        for off in range(0, len(data), 4 * MiB):
            f.write(data[off : off + 4 * MiB])
    assert backing.keys() == {"huge.bin"}
    assert backing.s3 is not None
    head = backing.s3.client().head_object(Bucket=backing.bucket, Key="huge.bin")
    assert head["ContentLength"] == len(data)
    assert "-" in head["ETag"], f"not a multipart upload: ETag {head['ETag']}"
    assert backing.read_object("huge.bin") == data
