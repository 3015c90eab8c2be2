"""The committed gRPC stubs (cloudfs/v1) are what proto/generate.sh makes of proto/."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]


def test_the_committed_stubs_match_the_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="needs grpcio-tools (the [test] extra)")
    (tmp_path / "cloudfs" / "v1").mkdir(parents=True)
    subprocess.run(
        ["bash", str(REPO / "proto" / "generate.sh"), str(tmp_path)], check=True, timeout=120
    )
    generated = sorted(p.name for p in (tmp_path / "cloudfs" / "v1").iterdir())
    committed = sorted(p.name for p in (REPO / "cloudfs" / "v1").iterdir() if p.is_file())
    assert generated == committed
    for name in generated:
        fresh = (tmp_path / "cloudfs" / "v1" / name).read_text()
        assert fresh == (REPO / "cloudfs" / "v1" / name).read_text(), (
            f"{name}: run proto/generate.sh"
        )
