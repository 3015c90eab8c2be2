"""DirectoryCache: a volume's directories, by path, for a short while.

A path is resolved in the tree one name at a time, one call each; a training
loop opens thousands of files a second in the same few directories. So a
``VolumeHandle`` keeps the directories it resolved for ``ttl`` seconds (the
client's ``meta_ttl``, as a mount's kernel keeps names), and never a file's
attributes: a file's size and version come from the tree at each open, which
keeps close-to-open as a mount has it.

A cached directory that is gone (removed, or its inode otherwise dead) shows as
NotFound, ENOTDIR or ESTALE below it, and the handle then resolves the path
again from the root (``VolumeHandle.resolve``). What the cache can hide within
``ttl``: another client's rename of a directory, whose old path still leads to
it. The handle's own renames and removals forget the paths they change.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from cloudfs.types import Attr

Parts = tuple[bytes, ...]  # names below the volume's root

MAX_ENTRIES = 65536  # a bound on memory; passing it starts the cache afresh


class DirectoryCache:
    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        """``ttl``: seconds a directory is trusted without asking (0: never)."""
        self._ttl = ttl
        self._clock = clock
        self._entries: dict[Parts, tuple[Attr, float]] = {}
        self._lock = threading.Lock()

    def deepest(self, parts: Parts) -> tuple[int, Attr | None]:
        """(n, attr): the longest fresh prefix ``parts[:n]`` known to be a directory
        (0, None when none is)."""
        now = self._clock()
        with self._lock:
            for n in range(len(parts), 0, -1):
                found = self._entries.get(parts[:n])
                if found is not None and found[1] > now:
                    return n, found[0]
        return 0, None

    def put(self, parts: Parts, attr: Attr) -> None:
        if not attr.is_dir or self._ttl <= 0 or not parts:
            return
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[parts] = (attr, self._clock() + self._ttl)

    def forget(self, parts: Parts) -> None:
        """Drop ``parts`` and every path below it."""
        n = len(parts)
        with self._lock:
            for cached in [p for p in self._entries if p[:n] == parts]:
                del self._entries[cached]
