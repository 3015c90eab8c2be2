"""Writes the layer table of ``testkit/layers.py`` into ``docs/architecture.md``.

    python3 -m testkit.architecture          # rewrite the table in place
    python3 -m testkit.architecture --check  # exit 1 if the doc's table is not the table
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from testkit.layers import ROWS, Row

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
BEGIN = "<!-- layer table: made by python3 -m testkit.architecture from testkit/layers.py -->"
END = "<!-- end of layer table -->"


def _path(package: str) -> str:
    path = package.replace(".", "/")
    root = DOC.parent.parent
    return f"{path}/" if (root / path).is_dir() else f"{path}.py"


def render(rows: Sequence[Row]) -> str:
    lines = [BEGIN, "| layer | package | what is there |", "|---|---|---|"]
    lines += [f"| {r.layer} | `{_path(r.package)}` | {r.holds} |" for r in rows]
    return "\n".join([*lines, END])


def rewrite(text: str, rows: Sequence[Row]) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + render(rows) + tail


def main(argv: Sequence[str]) -> int:
    text = DOC.read_text()
    fresh = rewrite(text, ROWS)
    if "--check" in argv:
        return 0 if fresh == text else 1
    DOC.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
