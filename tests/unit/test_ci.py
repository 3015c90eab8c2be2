"""The README's two commands and the scripts behind them: CI runs the README's test command
verbatim, and the README's first command (the demo) installs the mount's needs only."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sh_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", text, re.S)]


def test_ci_runs_the_readmes_test_command_verbatim_last() -> None:
    section = (ROOT / "README.md").read_text().split("## Try it, then test it", 1)[1]
    first, test = sh_blocks(section.split("\n## ", 1)[0])[:2]
    assert first == "bash benchmarks/demo.sh"
    assert "\n" not in test, "the README's test command is one line"
    commands = [
        line for line in (ROOT / ".ci/run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]  # fmt: skip
    assert commands[-1] == test


def test_the_demo_installs_the_mounts_needs_and_the_tests_build_on_them() -> None:
    demo = (ROOT / "benchmarks/demo.sh").read_text()
    assert "bash .ci/setup-mount" in demo and "bash .ci/setup\n" not in demo
    assert "bash .ci/setup-mount" in (ROOT / ".ci/setup").read_text()
