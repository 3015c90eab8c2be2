"""Imports point down the layer table (``testkit/layers.py``), and the architecture doc's
table is that table: an import up the table, a package without a row, or a doc table edited
by hand fails here."""

from __future__ import annotations

import shutil
from pathlib import Path

from testkit import architecture
from testkit.import_graph import imports_from, imports_of, modules, unlisted, upward_imports
from testkit.layers import ROWS

REPO = Path(__file__).resolve().parents[2]


def test_every_module_has_a_row() -> None:
    assert unlisted(REPO, ROWS) == []


def test_no_import_goes_up_the_table() -> None:
    assert upward_imports(REPO, ROWS) == []


def test_the_graph_is_read() -> None:
    """The check sees real edges: the mount's assembly imports the kernel adapter."""
    edges = {e.target for e in imports_of(REPO, REPO / "cloudfs/mount/assembly.py")}
    assert "cloudfs.fuse.session" in edges and "cloudfs.meta.client.grpc_meta" in edges
    assert sum(1 for _ in modules(REPO)) > 200


def test_csi_driver_fsspec_gateway_import_no_cli() -> None:
    paths = [*REPO.glob("csi-driver/cloudfs_csi/**/*.py")]
    paths += [*REPO.glob("cloudfs/fsspec/**/*.py"), *REPO.glob("cloudfs/gateway/**/*.py")]
    assert len(paths) > 30
    assert imports_from(REPO, paths, "cloudfs.cli") == []


def _copy_of_cloudfs(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "cloudfs", tmp_path / "cloudfs", ignore=shutil.ignore_patterns("v1"))
    return tmp_path


def test_a_planted_upward_import_fails(tmp_path: Path) -> None:
    root = _copy_of_cloudfs(tmp_path)
    (root / "cloudfs/ufs/planted.py").write_text(
        "from cloudfs.cli.main import main\nfrom ..mount import assembly\n"
    )
    found = upward_imports(root, ROWS)
    assert len(found) == 2, found
    assert found[0].startswith("cloudfs/ufs/planted.py:1: cloudfs.ufs.planted imports cloudfs.cli")
    assert "cloudfs.mount.assembly" in found[1]


def test_type_checking_imports_are_not_edges(tmp_path: Path) -> None:
    root = _copy_of_cloudfs(tmp_path)
    (root / "cloudfs/ufs/planted.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cloudfs.cli import main\n"
    )
    assert upward_imports(root, ROWS) == []


def test_a_new_package_without_a_row_fails(tmp_path: Path) -> None:
    root = _copy_of_cloudfs(tmp_path)
    (root / "cloudfs/newpkg").mkdir()
    (root / "cloudfs/newpkg/__init__.py").write_text("")
    # cloudfs.newpkg falls under the ``cloudfs`` row (the package's version): a leaf; an import
    # from it of anything above the leaves is then an upward import
    (root / "cloudfs/newpkg/x.py").write_text("from cloudfs.data import blocks\n")
    assert any("cloudfs.newpkg.x imports cloudfs.data" in f for f in upward_imports(root, ROWS))


def test_the_doc_table_is_made_from_the_layer_table() -> None:
    text = architecture.DOC.read_text()
    assert architecture.BEGIN in text, "docs/architecture.md lost its layer table markers"
    assert architecture.rewrite(text, ROWS) == text, "run: python3 -m testkit.architecture"


MAX_LINES = 450


def test_no_module_over_450_lines() -> None:
    """Rooms of one concern: a module past this holds several (generated code aside)."""
    long = {
        str(p.relative_to(REPO)): n
        for p in modules(REPO)
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by concern: {long}"
