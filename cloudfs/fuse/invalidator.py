"""Drop from the kernel's caches what changed behind this mount's back.

A thread follows the tree's change stream (``ChangeSource.changes``: other
mounts' commits from the tree service, or what a re-listing of the UFS found
changed) and tells the kernel to forget the attributes and pages of changed
inodes and the changed names, so an ``open`` after another mount's ``close``
sees the new size and bytes (close-to-open) without waiting for the
attribute timeout. ``cloudfs refresh`` hands its findings to ``apply`` too.
It runs outside the FUSE request handlers on purpose: a kernel invalidation
issued from inside a request can deadlock on the locks that request holds. A
broken stream is reopened after a growing pause.

Before the kernel drops an inode's pages, ``forget`` drops the mount's own
idea of the inode's object version (dataset mode reads by inode), so pages
read again come from the new version only.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

import pyfuse3

from cloudfs.errors import FsError
from cloudfs.meta.interface import ChangeSource, Invalidation
from cloudfs.metrics import Metrics
from cloudfs.types import InodeId

log = logging.getLogger(__name__)


class Invalidator:
    def __init__(
        self,
        source: ChangeSource,
        metrics: Metrics,
        forget: Callable[[InodeId], None] = lambda inode: None,
    ) -> None:
        self._source = source
        self._forget = forget
        self._entries = metrics.kernel_invalidations.labels(kind="entry")
        self._inodes = metrics.kernel_invalidations.labels(kind="inode")
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
                    self.apply(change)
                    pause = 0.5
            except FsError as exc:
                if self._stopped.is_set():
                    return
                log.warning("change stream of the tree broke (%s); reopening in %.1f s", exc, pause)
            self._stopped.wait(pause)
            pause = min(pause * 2, 10.0)

    def apply(self, change: Invalidation) -> None:
        """Tell the kernel; blocking, never from inside a FUSE request handler."""
        if change.lost:
            log.warning("missed some changes of other mounts: their attribute timeout applies")
        for parent, name in change.entries:
            pyfuse3.invalidate_entry_async(
                pyfuse3.InodeT(parent), pyfuse3.FileNameT(name), ignore_enoent=True
            )
            self._entries.inc()
        for inode in change.inodes:
            self._forget(inode)
            with contextlib.suppress(OSError):  # ENOENT: the kernel does not know it
                pyfuse3.invalidate_inode(pyfuse3.InodeT(inode), attr_only=False)
            self._inodes.inc()
        self.applied += 1
