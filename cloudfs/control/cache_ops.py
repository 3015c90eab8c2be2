"""The mount's side of ``cloudfs warmup`` and ``cloudfs stats``: control handlers.

Files are named by inode number: the CLI walks the tree through the mount (a
path is resolved by the kernel, with its permissions) and sends ``st_ino`` of
each file, which on a CloudFS mount is the tree's inode. A file that vanished
in between is reported and skipped. Files with nothing in the UFS yet (written
here, not uploaded) have nothing to warm.

* ``warmup``: ``{"inodes": [...], "parallel": N, "to": "group"|"local"}``;
  one event per file (``inode``, ``size``, ``fetched`` bytes from the UFS,
  ``by_group`` of them fetched by the group's owners, or ``error``); result
  totals. "local" puts blocks in this mount's disk tier (memory when there is
  none), through the cache group if any; "group" (the default in a group) has
  each block held by its owner only, no copy here; "group" outside a group is
  EINVAL.
* ``check``: totals of bytes held by a tier for those files.
* ``evict``: drops their blocks from every tier.
* ``metrics``: the Prometheus text exposition plus a few facts of the mount.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import trio
from prometheus_client import generate_latest

from cloudfs.control.protocol import inodes_of
from cloudfs.control.server import Emit, Handler
from cloudfs.data.blocks import ObjectRef
from cloudfs.data.reader import ObjectReader
from cloudfs.errors import FsError, InvalidArgument
from cloudfs.lib.jsonlines import Message
from cloudfs.meta.interface import Meta
from cloudfs.metrics import Metrics
from cloudfs.types import InodeId

log = logging.getLogger(__name__)

MAX_PARALLEL = 64


class CacheControl:
    def __init__(
        self, meta: Meta, reader: ObjectReader, metrics: Metrics, facts: dict[str, Any]
    ) -> None:
        self._meta = meta
        self._reader = reader
        self._metrics = metrics
        self._facts = facts

    def handlers(self) -> dict[str, Handler]:
        return {
            "warmup": self.warmup,
            "check": self.check,
            "evict": self.evict,
            "metrics": self.metrics,
        }

    async def warmup(self, request: Message, emit: Emit) -> Message:
        inodes = inodes_of(request)
        parallel = min(max(int(request.get("parallel", 8)), 1), MAX_PARALLEL)
        to_group = self._to_group(request.get("to"))
        totals = {"files": 0, "bytes": 0, "fetched": 0, "by_group": 0, "failed": 0}
        send, receive = trio.open_memory_channel[Message](parallel)
        limiter = trio.CapacityLimiter(parallel)

        async def one(inode: InodeId, send: trio.MemorySendChannel[Message]) -> None:
            async with send, limiter:
                await send.send(await self._warm_one(inode, to_group))

        async with trio.open_nursery() as nursery, receive:
            async with send:
                for inode in inodes:
                    nursery.start_soon(one, inode, send.clone())
            async for event in receive:
                if "error" in event:
                    totals["failed"] += 1
                else:
                    totals["files"] += 1
                    totals["bytes"] += event["size"]
                    totals["fetched"] += event["fetched"]
                    totals["by_group"] += event["by_group"]
                await emit(event)
        return totals

    def _to_group(self, to: object) -> bool:
        """Whether a warm-up goes to the group's owners only (``to``: the request's)."""
        if to not in (None, "group", "local"):
            raise InvalidArgument(f"warm-up to {to!r}: 'group' or 'local'")
        if to == "group" and not self._reader.in_group:
            raise InvalidArgument("this mount is in no cache group (--cache-peers, --cache-group)")
        return to != "local" and self._reader.in_group

    async def _warm_one(self, inode: InodeId, to_group: bool) -> Message:
        by_group = here = 0
        try:
            ref = await self._ref(inode)
            if ref is not None and to_group:
                by_group, here = await self._reader.warm_in_group(ref)
            elif ref is not None:
                here = await self._reader.prefetch_whole(ref)
        except FsError as e:
            return {"inode": inode, "error": str(e), "errno": e.errno}
        size = ref.size if ref else 0
        return {"inode": inode, "size": size, "fetched": by_group + here, "by_group": by_group}

    async def check(self, request: Message, emit: Emit) -> Message:
        totals = {"files": 0, "bytes": 0, "cached_bytes": 0, "complete_files": 0, "failed": 0}
        async for ref in self._refs(request, totals):
            size = ref.size if ref else 0
            cached = self._reader.cached_bytes(ref) if ref else 0
            totals["bytes"] += size
            totals["cached_bytes"] += cached
            totals["complete_files"] += cached == size
        return totals

    async def evict(self, request: Message, emit: Emit) -> Message:
        totals = {"files": 0, "evicted_bytes": 0, "failed": 0}
        async for ref in self._refs(request, totals):
            if ref is not None:
                totals["evicted_bytes"] += await self._reader.evict(ref)
        return totals

    async def _refs(
        self, request: Message, totals: dict[str, int]
    ) -> AsyncIterator[ObjectRef | None]:
        """The objects of the request's inodes, counting ``files`` and ``failed`` (gone)."""
        for inode in inodes_of(request):
            try:
                ref = await self._ref(inode)
            except FsError:
                totals["failed"] += 1
                continue
            totals["files"] += 1
            yield ref

    async def metrics(self, request: Message, emit: Emit) -> Message:
        text = generate_latest(self._metrics.registry).decode()
        return {"text": text, **self._facts}

    async def _ref(self, inode: InodeId) -> ObjectRef | None:
        """The UFS object of a regular file, or None if it has none yet."""
        attr = await trio.to_thread.run_sync(self._meta.getattr, inode)
        if not attr.is_reg:
            raise InvalidArgument(f"inode {inode} is not a regular file")
        if not attr.etag:
            return None
        key = await trio.to_thread.run_sync(self._meta.object_key, inode)
        return ObjectRef(key=key, etag=attr.etag, size=attr.size)
