"""Fixtures for tests through a real FUSE mount.

``mnt`` is the root of a fresh CloudFS mount. With CLOUDFS_TEST_PLAIN=1 it is a
plain local directory instead, which shows that a test's expectations are
POSIX's and not CloudFS's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def mnt(tmp_path: Path) -> Iterator[Path]:
    if os.environ.get("CLOUDFS_TEST_PLAIN") == "1":
        root = tmp_path / "plain"
        root.mkdir()
        yield root
        return
    pytest.skip("the CloudFS mount fixture is not wired yet")
