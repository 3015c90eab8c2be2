"""bound_malloc applies on glibc (the machines CloudFS runs on) and is harmless to repeat."""

from __future__ import annotations

import platform

import pytest

from cloudfs.mount.malloc import bound_malloc


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt settings are glibc's")
def test_bound_malloc_takes_on_glibc() -> None:
    assert bound_malloc()
    assert bound_malloc()
