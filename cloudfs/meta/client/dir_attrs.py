"""KnownDirAttrs: a directory's attributes as this mount's own create left them.

A create changes its directory, so the kernel drops the directory's cached
attributes and asks for them again before the next create there (its path
walk checks them): one more tree call per new file. The service's CreateOpen
answers with the directory's attributes as its transaction left them, and
``GrpcMeta.getattr`` answers the kernel from here instead, for at most
``KEEP_SECONDS``. What the kernel gets is what it would have kept in its own
cache for the mount's ``--meta-ttl`` had the create not dropped it.

An entry goes when anything else may have changed the directory: any other
change this mount makes (``clear``: a rename, an unlink, a chmod...) and
another mount's change in it (``forget``, from the service's change feed). A
create's answer is kept only if no ``clear`` came while it was in flight
(``generation``), so a change made meanwhile is never hidden behind it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from cloudfs.types import Attr, InodeId

KEEP_SECONDS = 1.0
MAX_ENTRIES = 4096  # directories created in within KEEP_SECONDS; more are simply asked


class KnownDirAttrs:
    def __init__(
        self, keep_seconds: float = KEEP_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._keep = keep_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._known: dict[InodeId, tuple[Attr, float]] = {}
        self._generation = 0

    @property
    def generation(self) -> int:
        """Taken before a create is sent, given back to ``remember`` with its answer."""
        with self._lock:
            return self._generation

    def remember(self, attr: Attr, generation: int) -> None:
        """Directory ``attr.inode``'s attributes, as a create sent at ``generation`` left
        them (dropped if anything was cleared meanwhile)."""
        with self._lock:
            if generation != self._generation:
                return
            if len(self._known) >= MAX_ENTRIES:
                self._known.clear()
            self._known[attr.inode] = (attr, self._clock() + self._keep)

    def get(self, inode: InodeId) -> Attr | None:
        with self._lock:
            found = self._known.get(inode)
            if found is None:
                return None
            if found[1] < self._clock():
                del self._known[inode]
                return None
            return found[0]

    def forget(self, inodes: Iterable[InodeId]) -> None:
        """Another mount changed these (the change feed)."""
        with self._lock:
            for inode in inodes:
                self._known.pop(inode, None)

    def clear(self) -> None:
        """This mount is about to change something else: nothing known stands."""
        with self._lock:
            self._generation += 1
            self._known.clear()
