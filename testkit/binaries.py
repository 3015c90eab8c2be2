"""The rule for a server binary a test needs: skip without it, fail under CI (which installs it)."""

from __future__ import annotations

import os

import pytest


def require_binary(binary: str | None, package: str) -> str:
    """``binary`` if found; else skip the test, or fail it when ``CI`` is set."""
    if binary is None:
        message = f"needs the {package.split()[-1]} server binary (apt-get install {package})"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI installs it in .ci/setup")
        pytest.skip(message)
    return binary
