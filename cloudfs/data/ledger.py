"""PrefetchLedger: were the blocks fetched ahead of readers used, or wasted?

Read-ahead puts blocks in the memory tier before anyone asks for them. A block
counts as *used* when a read is served from it, and as *wasted* when the memory
tier drops it unread (evicted to make room, or discarded). The two counters,
``cloudfs_prefetch_used_bytes_total`` and ``cloudfs_prefetch_wasted_bytes_total``,
tell whether the read-ahead window is too large for the workload.

The memory tier reports drops through the ``dropped`` callback given to it at
construction. All calls come from the trio thread or under the memory tier's
lock; each is one dict operation.
"""

from __future__ import annotations

from cloudfs.metrics import Metrics


class PrefetchLedger:
    def __init__(self, metrics: Metrics) -> None:
        self._unread: dict[str, int] = {}  # block key -> bytes
        self._used = metrics.prefetch_used_bytes
        self._wasted = metrics.prefetch_wasted_bytes

    def fetched(self, key: str, nbytes: int) -> None:
        """A prefetched block entered the memory tier."""
        self._unread[key] = nbytes

    def read(self, key: str) -> None:
        """A read was served from block ``key``."""
        nbytes = self._unread.pop(key, None)
        if nbytes is not None:
            self._used.inc(nbytes)

    def dropped(self, key: str) -> None:
        """The memory tier let go of block ``key``."""
        nbytes = self._unread.pop(key, None)
        if nbytes is not None:
            self._wasted.inc(nbytes)

    @property
    def unread_blocks(self) -> int:
        return len(self._unread)
