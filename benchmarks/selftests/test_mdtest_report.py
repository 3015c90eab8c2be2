"""The mdtest report without running the benchmark: targets judged from a made-up run,
the hand-written block kept across regenerations, the baseline read from old JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # as benchmarks/mdtest.py runs

from bench import mdtestreport
from bench.mdtestapi import API_PHASES, percentile

OLD_HEADER = "# old title\n\nold header, regenerated away\n\n"
KEPT = "**Reads scale.** Written by hand, kept."


def _rates(create: float, stat: float = 1000.0) -> dict[str, float]:
    return {"create": create, "stat": stat, "readdir": 500.0, "rename": create, "unlink": create}


def _run(baseline: list[str]) -> dict[str, Any]:
    api = {ph: {"ops_s": 100.0, "p50_ms": 2.5, "p99_ms": 9.0} for ph in API_PHASES}
    api["create_open"] = {"ops_s": 40.0, "p50_ms": 4.0, "p99_ms": 12.0}
    return {
        "meta": {
            "command": "python3 benchmarks/mdtest.py --files 100",
            "machine": {"date": "2026-12-07 00:00 UTC", "nproc": 2, "cloudfs_commit": "abc1234"},
            "etcd": "etcd Version: 3.4.23",
            "files": 100,
            "dirs": 2,
            "procs": [1, 8],
            "repeats": 1,
            "sizes": [0, 102400],
            "api_ops": 300,
            "baseline": baseline,
            "wall_seconds": 60.0,
        },
        "fuse": {
            "embedded-lmdb": {s: {"8": _rates(100.0)} for s in ("0", "102400")},
            "grpc-etcd": {s: {"8": _rates(70.0, stat=900.0)} for s in ("0", "102400")},
            "grpc-etcd-2": {"0": {"8": _rates(84.0)}},
        },
        "api": {"api-etcd": {"1": api}},
    }


def test_the_report_judges_the_targets_and_keeps_the_hand_written_block(tmp_path: Path) -> None:
    old = tmp_path / "old.json"  # the flat format of the runs before issue 27
    old.write_text(json.dumps({"grpc-etcd": {"8": _rates(30.0, stat=800.0)}}))
    report = tmp_path / "RESULTS-mdtest.md"
    report.write_text(f"{OLD_HEADER}{mdtestreport.BEGIN}\n{KEPT}\n<!-- END HAND-WRITTEN -->\n")
    data = _run([str(old)])
    for _ in range(2):  # a second regeneration keeps it too
        mdtestreport.write(data, report, tmp_path / "mdtest-x.json")
    text = report.read_text()
    assert "old header" not in text and text.count(KEPT) == 1
    assert "`python3 benchmarks/mdtest.py --files 100`" in text and "2026-12-07" in text
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if " | " in line}
    etcd_creates = rows["creates over etcd ÷ embedded LMDB, 8 clients, empty files"]
    assert "0.70x" in etcd_creates and "| met |" in etcd_creates
    two = rows["creates, 2 tree servers ÷ 1 over one etcd, 8 clients, empty files"]
    assert "1.20x" in two and "**missed**" in two
    assert (
        "not measured"
        in rows["creates, 2 tree servers ÷ 1 over one etcd, 8 clients, 100 KiB files"]
    )
    latency = next(v for k, v in rows.items() if k.startswith("median latency") and "mount" in k)
    assert "4.00 ms" in latency and "**missed**" in latency
    assert "1.12x" in rows["stat rate vs. before, grpc-etcd, 8 clients, empty files"]
    assert "## Through FUSE: 100 KiB files" in text
    assert "| api-etcd | 1 | create (plain) | 100 | 2.50 | 9.00 |" in text


def test_a_report_without_a_hand_written_block_gets_a_placeholder(tmp_path: Path) -> None:
    report = tmp_path / "new.md"
    mdtestreport.write(_run([]), report, tmp_path / "x.json")
    text = report.read_text()
    assert mdtestreport.BEGIN in text and "kept when the report is regenerated" in text


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 0.5) == 50.0
    assert percentile([3.0], 0.99) == 3.0
