"""Calling the ObjectStore from tree operations with the protocol's error contract.

Stores raise ``cloudfs.errors`` exceptions already; anything else that escapes
(a bug in a wrapper, an unexpected client exception) becomes ``RemoteIOError``
with the original as ``__cause__`` so the VFS sees EIO instead of a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from cloudfs.errors import FsError, RemoteIOError

P = ParamSpec("P")
R = TypeVar("R")


def call_store(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    try:
        return fn(*args, **kwargs)
    except FsError:
        raise
    except Exception as exc:
        raise RemoteIOError(f"object store failed: {exc!r}") from exc
