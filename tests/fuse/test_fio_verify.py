"""fio writes through a write-back mount with crc32c verify headers; a fresh mount verifies.

The second mount has an empty cache and its own tree, so what it verifies came
back from the UFS: the bytes fio wrote, uploaded by the first mount's
write-back path (drained at unmount).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from testkit.mounts import Backing, mounted

pytestmark = [
    pytest.mark.parametrize("backing", ["s3"], indirect=True),
    pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio (apt-get install fio)"),
]

JOBS = [
    # sequential 1 MiB writes of two 24 MiB files, and random 4-64 KiB writes into one of 8 MiB
    ["--name=seq", "--rw=write", "--bs=1M", "--size=24M", "--numjobs=2"],
    ["--name=rand", "--rw=randwrite", "--bsrange=4k-64k", "--size=8M", "--randseed=42"],
]


def fio(directory: Path, job: list[str], *extra: str) -> subprocess.CompletedProcess[str]:
    """One fio run in ``directory``; its verify-state files go to the mount's parent."""
    cmd = [
        "fio", f"--directory={directory}", "--ioengine=psync", "--verify=crc32c",
        "--verify_fatal=1", "--group_reporting", *job, *extra,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=directory.parent)


def test_fio_verify_across_a_fresh_mount(backing: Backing) -> None:
    with mounted(backing, ["--write-mode", "back"]) as writer:
        for job in JOBS:
            wrote = fio(writer.root, job, "--do_verify=0")
            assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    assert len(backing.keys()) == 3  # seq.0.0, seq.1.0, rand.0.0, drained at unmount
    with mounted(backing) as reader:
        for job in JOBS:
            checked = fio(reader.root, job, "--verify_only")
            assert checked.returncode == 0, checked.stdout + checked.stderr
            assert "verify" not in checked.stderr.lower(), checked.stderr
