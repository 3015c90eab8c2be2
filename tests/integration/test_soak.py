"""The soak under faults, short: ``benchmarks/soak.py --duration 3m`` (about 4 minutes).

Every fault of the schedule runs once (the S3 outage cut to 30 s); the report must show
no byte lost, no failure that a fault does not excuse, every fault recovered from, and
the mounts' memory and descriptors flat.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.etcd import require_etcd

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_a_short_soak_loses_nothing_and_survives_every_fault(tmp_path: Path) -> None:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("the soak needs /dev/fuse and root (FUSE mounts, a tmpfs)")
    if shutil.which("fusermount3") is None:
        pytest.skip("the soak needs fusermount3 (apt-get install fuse3)")
    require_etcd()
    target = tmp_path / "soak.json"
    command = [
        sys.executable, str(REPO / "benchmarks" / "soak.py"), "--duration", "3m",
        "--report", str(target), "--workdir", str(tmp_path / "work"),
    ]  # fmt: skip
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=420,
        cwd=REPO,
        check=False,
    )
    assert target.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(target.read_text())
    summary = result.stdout[-3000:]
    assert report["verify"]["bytes_lost"] == 0, report["verify"]["bad_files"]
    assert report["verify"]["files_checked"] > 0, summary
    assert report["ops"]["failed_not_allowed"] == 0, [
        f for f in report["ops"]["failures"] if f["allowed_by"] is None
    ]
    assert len(report["faults"]) == 7, summary
    for fault in report["faults"]:
        assert fault["error"] is None, fault
        recovered = report["recovery"][fault["name"]]
        assert recovered and all(v is not None for v in recovered.values()), (fault, recovered)
    for name, flat in report["memory"].items():
        assert flat["flat"], (name, flat)
    assert report["verdict"] == [], summary
    assert result.returncode == 0, summary
