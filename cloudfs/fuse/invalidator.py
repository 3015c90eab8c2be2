"""Drop from the kernel's caches what other mounts of a shared tree changed.

A thread follows the tree's change stream (``ChangeSource.changes``) and
tells the kernel to forget the attributes and pages of changed inodes and
the changed names, so an ``open`` after another mount's ``close`` sees the
new size and bytes (close-to-open) without waiting for the attribute
timeout. It runs outside the FUSE request handlers on purpose: a kernel
invalidation issued from inside a request can deadlock on the locks that
request holds. A broken stream is reopened after a growing pause.
"""

from __future__ import annotations

import contextlib
import logging
import threading

import pyfuse3

from cloudfs.errors import FsError
from cloudfs.meta.interface import ChangeSource, Invalidation

log = logging.getLogger(__name__)


class Invalidator:
    def __init__(self, source: ChangeSource) -> None:
        self._source = source
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cloudfs-invalidator", daemon=True)
        self.applied = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop following (closing the source ends a blocked stream)."""
        self._stopped.set()

    def _run(self) -> None:
        pause = 0.5
        while not self._stopped.is_set():
            try:
                for change in self._source.changes():
                    self._apply(change)
                    pause = 0.5
            except FsError as exc:
                if self._stopped.is_set():
                    return
                log.warning("change stream of the tree broke (%s); reopening in %.1f s", exc, pause)
            self._stopped.wait(pause)
            pause = min(pause * 2, 10.0)

    def _apply(self, change: Invalidation) -> None:
        if change.lost:
            log.warning("missed some changes of other mounts: their attribute timeout applies")
        for parent, name in change.entries:
            pyfuse3.invalidate_entry_async(
                pyfuse3.InodeT(parent), pyfuse3.FileNameT(name), ignore_enoent=True
            )
        for inode in change.inodes:
            with contextlib.suppress(OSError):  # ENOENT: the kernel does not know it
                pyfuse3.invalidate_inode(pyfuse3.InodeT(inode), attr_only=False)
        self.applied += 1
