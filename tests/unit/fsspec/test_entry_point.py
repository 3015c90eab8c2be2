"""The ``fsspec.specs`` entry point names ``CloudFileSystem``: what makes ``cloudfs://``
work in fsspec, pandas and pyarrow once the package is installed."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from cloudfs.fsspec import CloudFileSystem

tomllib = pytest.importorskip("tomllib", reason="Python 3.11's tomllib")


def test_the_entry_point_names_the_filesystem() -> None:
    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    entry = tomllib.loads(pyproject.read_text())["project"]["entry-points"]["fsspec.specs"]
    module, _, name = entry["cloudfs"].partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert cls is CloudFileSystem
    assert cls.protocol == "cloudfs"
    assert cls._strip_protocol("cloudfs://vol/a/b/") == "vol/a/b"
