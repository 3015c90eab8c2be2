"""The mount's side of ``cloudfs refresh``: list directories again now, tell the kernel.

``refresh``: ``{"inodes": [...]}``, directories named by inode number (the CLI
sends a file's directory). Each is listed from the UFS at once, whatever
``--meta-ttl`` says; what the listing changed (files with a new ETag or size,
names gone or new), and the directory itself, are dropped from the kernel's
caches before the answer, so the next access after the command sees the UFS
as it is. A shared tree also tells its other mounts. Result:
``{"directories": N, "changes": M}``.

With ``"recursive": true`` (and ``"parallel": N``, 8 by default), every
directory under each one named that the tree has listed is refreshed too, N
at a time (``refresh_tree``): one event per directory, and a directory that
cannot be listed is an event, not the end of the request. Result:
``{"directories": N, "changes": M, "failed": F}``.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from cloudfs.control.protocol import inodes_of
from cloudfs.control.refresh_tree import Totals, TreeRefresh
from cloudfs.control.server import Emit, Handler
from cloudfs.errors import InvalidArgument
from cloudfs.lib.jsonlines import Message
from cloudfs.meta.interface import Invalidation, Meta
from cloudfs.types import InodeId

MAX_PARALLEL = 64


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
        recursive = request.get("recursive", False)
        if not isinstance(recursive, bool):
            raise InvalidArgument("'recursive' must be true or false")
        if recursive:
            return await self._refresh_trees(directories, _parallel(request), emit)
        changes = 0
        for inode in directories:
            found = await trio.to_thread.run_sync(self._meta.refresh, inode)
            changes += len(found.inodes) + len(found.entries)
            drop = Invalidation((inode, *found.inodes), found.entries)
            await trio.to_thread.run_sync(self._drop, drop)
        return {"directories": len(directories), "changes": changes}

    async def _refresh_trees(self, roots: list[InodeId], parallel: int, emit: Emit) -> Message:
        totals = Totals()
        for index, root in enumerate(roots):

            async def tagged(event: Message, index: int = index) -> None:
                await emit({"root": index, **event})

            walk = TreeRefresh(self._meta, self._drop, parallel, tagged)
            await walk.run(root)
            totals.directories += walk.totals.directories
            totals.changes += walk.totals.changes
            totals.failed += walk.totals.failed
        return totals.result()


def _parallel(request: Message) -> int:
    parallel = request.get("parallel", 8)
    if not isinstance(parallel, int) or not 1 <= parallel <= MAX_PARALLEL:
        raise InvalidArgument(f"'parallel' must be a number from 1 to {MAX_PARALLEL}")
    return parallel
