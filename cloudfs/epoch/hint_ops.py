"""The hints socket's handlers: jobs announce their order and ask what is cached.

* ``announce`` (streaming): ``{"op": "announce", "job": NAME, "rank": R, "epoch":
  E, "detach": false}``, then lines ``{"paths": [...]}`` (relative to the mount's
  root, in reading order, at most ``MAX_LINE`` bytes each), then an empty line.
  The mount answers one event, ``{"accepted": N, "skipped": {reason: count},
  "examples": [...], "cached": ratio}``. A held announcement (the default)
  lives until the client closes the connection; then the final line. A
  detached one (``cloudfs hint``) gets its final line at once and lives until
  its files go unread for ``IDLE_SECONDS``.
* ``cached``: ``{"op": "cached", "paths": [...]}`` -> ``{"cached": [bool, ...]}``,
  whether each file's bytes are all held (or being fetched) by a tier.

Every path is resolved as the caller's user would see it (``resolve.py``);
what the caller may not read is skipped and counted, never fetched. An order
past ``MAX_FILES`` files is cut there (and says so).
"""

from __future__ import annotations

import errno
import logging
from array import array
from collections import Counter

import trio

from cloudfs.control.protocol import PEER
from cloudfs.control.server import ClientLines, Emit, Handler, StreamHandler
from cloudfs.data.blocks import ObjectRef
from cloudfs.data.reader import ObjectReader
from cloudfs.epoch.board import RANKED_FILES, JobBoard, JobKey, Known
from cloudfs.epoch.order import MAX_FILES, EpochOrder
from cloudfs.epoch.resolve import Caller, Resolver
from cloudfs.errors import FsError, InvalidArgument
from cloudfs.lib.jsonlines import Message
from cloudfs.meta.interface import Meta

log = logging.getLogger(__name__)

MAX_JOB_NAME = 128
EXAMPLES = 5


class _Collected:
    """An order as it arrives: arrays, objects of its first files, what was skipped."""

    def __init__(self) -> None:
        self.inodes = array("Q")
        self.sizes = array("Q")
        self.known: dict[int, Known] = {}
        self.cached_bytes = 0
        self.skipped: Counter[str] = Counter()
        self.examples: list[str] = []

    def skip(self, reason: str, path: str) -> None:
        self.skipped[reason] += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(f"{path}: {reason}")


class HintControl:
    def __init__(self, meta: Meta, reader: ObjectReader, board: JobBoard) -> None:
        self._meta = meta
        self._reader = reader
        self._board = board

    def stream_handlers(self) -> dict[str, StreamHandler]:
        return {"announce": self.announce}

    def handlers(self) -> dict[str, Handler]:
        return {"cached": self.cached}

    async def announce(self, request: Message, lines: ClientLines, emit: Emit) -> Message:
        key = _job_key(request)
        epoch = _int(request, "epoch", 0)
        detached = bool(request.get("detach", False))
        resolver = Resolver(self._meta, _caller(request))
        got = _Collected()
        async for message in lines.messages():
            paths = message.get("paths")
            if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                raise InvalidArgument("each line after an announce holds 'paths': [str, ...]")
            await trio.to_thread.run_sync(self._collect, resolver, paths, got)
        order = EpochOrder(got.inodes, got.sizes)
        job = self._board.announce(
            key, epoch, order, got.known, got.cached_bytes, detached=detached
        )
        try:
            await emit(
                {
                    "accepted": len(order),
                    "skipped": dict(got.skipped),
                    "examples": got.examples,
                    "cached": job.telemetry.predicted,
                }
            )
            if detached:
                return {"accepted": len(order)}
            await lines.closed()
        except BaseException:
            self._board.end(job)  # the client went away before (or while) holding it
            raise
        self._board.end(job)
        return {}

    def _collect(self, resolver: Resolver, paths: list[str], got: _Collected) -> None:
        """Resolve one line's paths into ``got`` (a worker thread: tree lookups)."""
        for path in paths:
            if len(got.inodes) >= MAX_FILES:
                got.skip(f"past {MAX_FILES} files", path)
                continue
            try:
                attr = resolver.file(path)
                ref = None
                if attr.etag:
                    key = self._meta.object_key(attr.inode)
                    ref = ObjectRef(key=key, etag=attr.etag, size=attr.size)
            except FsError as e:
                got.skip(errno.errorcode.get(e.errno, "EIO"), path)
                continue
            index = len(got.inodes)
            got.inodes.append(attr.inode)
            got.sizes.append(attr.size)
            if ref is None:
                continue
            keys = self._reader.block_keys(ref)
            got.cached_bytes += self._reader.held_bytes(ref, keys)
            if index < RANKED_FILES:
                got.known[index] = Known(ref, tuple(keys))

    async def cached(self, request: Message, emit: Emit) -> Message:
        paths = request.get("paths")
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise InvalidArgument("'paths' must be a list of paths")
        resolver = Resolver(self._meta, _caller(request))
        return {"cached": await trio.to_thread.run_sync(self._cached, resolver, paths)}

    def _cached(self, resolver: Resolver, paths: list[str]) -> list[bool]:
        out = []
        for path in paths:
            try:
                attr = resolver.file(path)
                if not attr.etag:
                    out.append(attr.size == 0)
                    continue
                ref = ObjectRef(self._meta.object_key(attr.inode), attr.etag, attr.size)
            except FsError:
                out.append(False)
                continue
            out.append(self._reader.held_bytes(ref) >= ref.size)
        return out


def _job_key(request: Message) -> JobKey:
    name = request.get("job")
    if not isinstance(name, str) or not name or len(name) > MAX_JOB_NAME:
        raise InvalidArgument(f"'job' must be a name of 1 to {MAX_JOB_NAME} characters")
    if not name.isprintable():
        raise InvalidArgument("'job' must be printable")
    return JobKey(name, _int(request, "rank", 0))


def _int(request: Message, name: str, default: int) -> int:
    value = request.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(f"'{name}' must be a non-negative integer")
    return value


def _caller(request: Message) -> Caller:
    peer = request.get(PEER)
    if not isinstance(peer, dict):
        raise FsError("no caller credentials", errno=errno.EPERM)
    return Caller.of(int(peer["pid"]), int(peer["uid"]), int(peer["gid"]))
