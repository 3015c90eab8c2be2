"""``cloudfs refresh --recursive``: list again every directory under one the mount has listed.

The directory named is listed from the UFS at once (``Meta.refresh``), what
that changed is dropped from the kernel, and then its subdirectories that the
tree had listed before are refreshed the same way, down the tree, up to
``parallel`` directories at a time (each one LIST of the UFS, page after
page). A subdirectory never listed is left alone: its first access lists it
anyway. Which were listed is asked of the tree without touching the UFS:
``Meta.lookup_if_listed`` answers None for a directory that needs a listing
first (and an attribute, or ``NotFound``, for one that does not).

One event per directory visited, in the order they finish: ``{"path", "found",
"changes"}`` (``path`` relative to the directory named, "" for itself;
``found``: listed subdirectories to visit next) or ``{"path", "failed",
"errno"}`` (not "error": that key is a request's final line). A directory that
cannot be listed is reported, its subdirectories are skipped, and the rest of
the tree goes on; one removed from the tree while the walk ran (``NotFound``,
``NotADirectory`` below the directory named) is skipped silently.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass

import trio

from cloudfs.control.server import Emit
from cloudfs.errors import FsError
from cloudfs.lib.jsonlines import Message
from cloudfs.meta.interface import Invalidation, Meta
from cloudfs.types import InodeId

GONE = (errno.ENOENT, errno.ENOTDIR)
PAGE = 1000  # entries per readdir of the tree
# Any name will do: lookup_if_listed answers None exactly when the directory
# needs a listing first, whether or not the name is in it.
PROBE = b".cloudfs-refresh-probe"


@dataclass
class Totals:
    """Directories refreshed, the changes they had, and directories that failed."""

    directories: int = 0
    changes: int = 0
    failed: int = 0

    def result(self) -> Message:
        return {
            "directories": self.directories,
            "changes": self.changes,
            "failed": self.failed,
        }


class TreeRefresh:
    """Refreshes the listed directories under one directory, ``parallel`` at a time."""

    def __init__(
        self, meta: Meta, drop: Callable[[Invalidation], None], parallel: int, emit: Emit
    ) -> None:
        self._meta = meta
        self._drop = drop
        self._limiter = trio.CapacityLimiter(parallel)
        self._emit = emit
        self.totals = Totals()

    async def run(self, root: InodeId) -> None:
        send, receive = trio.open_memory_channel[Message](self._limiter.total_tokens)
        async with trio.open_nursery() as nursery, receive:

            async def visit(
                inode: InodeId, path: str, send: trio.MemorySendChannel[Message]
            ) -> None:
                async with send:
                    async with self._limiter:
                        event, subdirectories = await self._visit(inode, path, path == "")
                    for child, name in subdirectories:
                        nursery.start_soon(visit, child, _join(path, name), send.clone())
                    if event is not None:
                        await send.send(event)

            async with send:
                nursery.start_soon(visit, root, "", send.clone())
            async for event in receive:
                self._count(event)
                await self._emit(event)

    def _count(self, event: Message) -> None:
        if "failed" in event:
            self.totals.failed += 1
        else:
            self.totals.directories += 1
            self.totals.changes += int(event["changes"])

    async def _visit(
        self, inode: InodeId, path: str, root: bool
    ) -> tuple[Message | None, list[tuple[InodeId, bytes]]]:
        """Refresh one directory: its event (None if it is gone) and the subdirectories next."""
        try:
            found = await trio.to_thread.run_sync(self._meta.refresh, inode)
            changes = len(found.inodes) + len(found.entries)
            drop = Invalidation((inode, *found.inodes), found.entries)
            await trio.to_thread.run_sync(self._drop, drop)
            subdirectories = await trio.to_thread.run_sync(self._listed_subdirectories, inode)
        except FsError as e:
            if not root and e.errno in GONE:  # removed from the tree since its parent was read
                return None, []
            return {"path": path, "failed": str(e), "errno": e.errno}, []
        event = {"path": path, "found": len(subdirectories), "changes": changes}
        return event, subdirectories

    def _listed_subdirectories(self, inode: InodeId) -> list[tuple[InodeId, bytes]]:
        """The subdirectories of ``inode`` (listed just now) that were listed themselves."""
        listed: list[tuple[InodeId, bytes]] = []
        after: bytes | None = None
        while True:
            page = self._meta.readdir(inode, after, PAGE)
            for entry in page:
                if entry.attr.is_dir and self._was_listed(entry.attr.inode):
                    listed.append((entry.attr.inode, entry.name))
            if len(page) < PAGE:
                return listed
            after = page[-1].name

    def _was_listed(self, inode: InodeId) -> bool:
        try:
            return self._meta.lookup_if_listed(inode, PROBE) is not None
        except FsError as e:
            if e.errno != errno.ENOENT:
                raise
            return True  # listed, and the probe is not in it


def _join(path: str, name: bytes) -> str:
    text = name.decode("utf-8", "backslashreplace")
    return f"{path}/{text}" if path else text
