"""Connections: the ``VolumeHandle`` of each volume a filesystem object has used, in
this process.

fsspec keeps filesystem objects (its instance cache, a Dataset's attribute), and
PyTorch's DataLoader forks its workers after the object exists. gRPC channels,
boto3's connection pools and locks held by another thread at the fork do not
survive into the child, so each process opens its own handles: a fork drops the
parent's (without closing them: they are the parent's to close), both from a
``register_at_fork`` hook (before any thread of the child can use them) and by
comparing ``os.getpid()`` (should a fork happen some way that skips the hook).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable

from cloudfs.client.volume import VolumeHandle


class Connections:
    def __init__(self, open_volume: Callable[[str], VolumeHandle]) -> None:
        self._open = open_volume
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._volumes: dict[str, VolumeHandle] = {}
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forked(ref))

    def volume(self, name: str) -> VolumeHandle:
        """This process's handle of volume ``name``, opened on first use.

        Raises what opening raises (``NotFound`` for an unknown volume); a
        failed open is tried again by the next call.
        """
        if os.getpid() != self._pid:
            self.forget_parent()
        with self._lock:
            handle = self._volumes.get(name)
            if handle is None:
                handle = self._volumes[name] = self._open(name)
            return handle

    def forget_parent(self) -> None:
        """In a forked child: drop what the parent opened (it is not ours to close)."""
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._volumes = {}

    def close(self) -> None:
        """Close this process's handles (a fork's child has none of the parent's)."""
        if os.getpid() != self._pid:
            self.forget_parent()
            return
        with self._lock:
            handles, self._volumes = list(self._volumes.values()), {}
        for handle in handles:
            handle.close()


def _forked(ref: weakref.ref[Connections]) -> None:
    connections = ref()
    if connections is not None:
        connections.forget_parent()
