"""The committed gRPC stubs (cloudfs/v1, cloudfs/etcdpb) are what proto/generate.sh makes
of proto/."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
PACKAGES = ("v1", "etcdpb")


def test_the_committed_stubs_match_the_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="needs grpcio-tools (the [test] extra)")
    for package in PACKAGES:
        (tmp_path / "cloudfs" / package).mkdir(parents=True)
    subprocess.run(
        ["bash", str(REPO / "proto" / "generate.sh"), str(tmp_path)], check=True, timeout=120
    )
    for package in PACKAGES:
        fresh_dir, committed_dir = tmp_path / "cloudfs" / package, REPO / "cloudfs" / package
        generated = sorted(p.name for p in fresh_dir.iterdir())
        committed = sorted(p.name for p in committed_dir.iterdir() if p.is_file())
        assert generated == committed, package
        for name in generated:
            fresh = (fresh_dir / name).read_text()
            assert fresh == (committed_dir / name).read_text(), (
                f"cloudfs/{package}/{name}: run proto/generate.sh"
            )
