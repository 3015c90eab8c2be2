"""The mount's side of ``cloudfs refresh``: list directories again now, tell the kernel.

``refresh``: ``{"inodes": [...]}``, directories named by inode number (the CLI
sends a file's directory). Each is listed from the UFS at once, whatever
``--meta-ttl`` says; what the listing changed (files with a new ETag or size,
names gone or new), and the directory itself, are dropped from the kernel's
caches before the answer, so the next access after the command sees the UFS
as it is. A shared tree also tells its other mounts. Result:
``{"directories": N, "changes": M}``.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from cloudfs.control.protocol import inodes_of
from cloudfs.control.server import Emit, Handler
from cloudfs.lib.jsonlines import Message
from cloudfs.meta.interface import Invalidation, Meta


class RefreshControl:
    def __init__(self, meta: Meta, drop: Callable[[Invalidation], None]) -> None:
        """``drop``: tells the kernel to forget an invalidation's inodes and names
        (blocking; called in a worker thread, never from a FUSE request)."""
        self._meta = meta
        self._drop = drop

    def handlers(self) -> dict[str, Handler]:
        return {"refresh": self.refresh}

    async def refresh(self, request: Message, emit: Emit) -> Message:
        directories = inodes_of(request)
        changes = 0
        for inode in directories:
            found = await trio.to_thread.run_sync(self._meta.refresh, inode)
            changes += len(found.inodes) + len(found.entries)
            drop = Invalidation((inode, *found.inodes), found.entries)
            await trio.to_thread.run_sync(self._drop, drop)
        return {"directories": len(directories), "changes": changes}
