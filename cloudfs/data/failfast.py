"""FailFast: a read of an object whose fetch failed moments ago fails at once.

After a failed read-ahead the kernel retries the read at once; without this,
a dead endpoint would cost every read() two full rounds of timeouts and
retries instead of one. An object is remembered as failed for
``FAIL_FAST_SECONDS`` after a ``RemoteIOError`` of a load of its blocks,
foreground or one a read waited for, and forgotten when a load of it succeeds.
"""

from __future__ import annotations

import trio

from cloudfs.data.blocks import ObjectRef
from cloudfs.data.loader import BlockLoader, Claimed
from cloudfs.errors import RemoteIOError

# A read of an object whose fetch failed less than this long ago fails at once.
FAIL_FAST_SECONDS = 2.0
# Objects remembered as failed; past this, all are forgotten.
REMEMBERED = 1024


class FailFast:
    def __init__(self, loader: BlockLoader) -> None:
        self._loader = loader
        self._recent_failures: dict[str, float] = {}  # object key -> trio time of failure

    async def load(self, ref: ObjectRef, claimed: Claimed) -> dict[int, bytes]:
        """Load blocks from the store for a read, unless it just failed for this object
        (then every claimed flight is abandoned and ``RemoteIOError`` raised)."""
        failed_at = self._recent_failures.get(ref.key)
        if failed_at is not None and trio.current_time() - failed_at < FAIL_FAST_SECONDS:
            for _index, flight in claimed:
                flight.abandon()
            raise RemoteIOError(f"{ref.key!r}: the object store failed moments ago")
        try:
            loaded = await self._loader.load(ref, claimed, prefetch=False, to_memory=True)
        except RemoteIOError:
            self.failed(ref)
            raise
        self._recent_failures.pop(ref.key, None)
        return loaded

    def failed(self, ref: ObjectRef) -> None:
        """Reads of ``ref`` fail at once for ``FAIL_FAST_SECONDS``."""
        self._recent_failures[ref.key] = trio.current_time()
        if len(self._recent_failures) > REMEMBERED:
            self._recent_failures.clear()
