"""An in-process tree service for the fuzz tests, and what they check after each call."""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from cloudfs.meta.engine.kv_lmdb import LmdbKV
from cloudfs.meta.service.server import TreeServer
from cloudfs.meta.service.volumes import Volumes
from cloudfs.meta.wire.constants import META_SERVICE
from cloudfs.meta.wire.volumes import VolumeSpec
from cloudfs.types import ROOT_INODE
from cloudfs.ufs.interface import ObjectStore
from cloudfs.ufs.local import LocalObjectStore
from cloudfs.v1 import meta_pb2 as pb
from testkit.memory_store import MemoryObjectStore

VOLUME = "fuzz"
# What a proper refusal may be; UNKNOWN and INTERNAL say the server did not expect it.
PROPER = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
}


class Tracebacks(logging.Handler):
    """Every log record with a traceback: a server that logs one did not expect the input."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.records.append(record)

    def take(self) -> list[str]:
        found = [self.format(r) for r in self.records]
        self.records.clear()
        return found


@dataclass
class Tree:
    server: TreeServer
    channel: grpc.Channel
    store: ObjectStore
    tracebacks: Tracebacks
    address: str = ""
    _calls: dict[str, Any] = field(default_factory=dict)

    def call(self, service: str, method: str, request: Any, reply: Any, timeout: float = 10) -> Any:
        key = f"/{service}/{method}"
        if key not in self._calls:
            self._calls[key] = self.channel.unary_unary(
                key,
                request_serializer=lambda m: m if isinstance(m, bytes) else m.SerializeToString(),
                response_deserializer=reply.FromString,
            )
        return self._calls[key](request, timeout=timeout)

    def meta(self, method: str, request: Any, reply: Any = pb.AttrReply) -> Any:
        return self.call(META_SERVICE, method, request, reply)

    def snapshot(self) -> dict[tuple[int, bytes], tuple[int, int, int]]:
        """Every entry under the root: (parent, name) -> (inode, mode, size)."""
        seen: dict[tuple[int, bytes], tuple[int, int, int]] = {}
        todo = [int(ROOT_INODE)]
        while todo:
            parent = todo.pop()
            after: bytes | None = None
            while True:
                request = pb.ReadDirRequest(volume=VOLUME, inode=parent, limit=100)
                if after is not None:
                    request.after = after
                page = self.meta("ReadDir", request, pb.ReadDirReply).entries
                for e in page:
                    seen[(parent, e.name)] = (e.attr.inode, e.attr.mode, e.attr.size)
                    if stat.S_ISDIR(e.attr.mode):
                        todo.append(e.attr.inode)
                if not page:
                    break
                after = page[-1].name
        return seen

    def alive(self) -> None:
        """The server still answers (a health call)."""
        self.meta("StatFs", pb.VolumeRef(volume=VOLUME), pb.StatFsReply)


@contextmanager
def running_tree(
    tmp: Path, listen: str = "127.0.0.1", ufs: str = "memory", **server_options: Any
) -> Iterator[Tree]:
    """A TreeServer over LMDB in this process on ``listen`` (a host), one volume ``VOLUME``
    over a store holding a few objects (``ufs``: "memory", or "local", a directory under
    ``tmp``); its log's tracebacks collected."""
    store: ObjectStore
    if ufs == "local":
        (tmp / "ufs").mkdir()
        store = LocalObjectStore(str(tmp / "ufs"))
    else:
        store = MemoryObjectStore()
    for key in ("a/b.txt", "a/c/d.bin", "e.txt"):
        store.put_bytes(key, b"x" * 10)
    engine = LmdbKV(str(tmp / "tree"))
    volumes = Volumes(engine, lambda uri: store)
    tracebacks = Tracebacks()
    logger = logging.getLogger("cloudfs")
    logger.addHandler(tracebacks)
    server = TreeServer(volumes, f"{listen}:0", **server_options)
    server.start()
    address = f"127.0.0.1:{server.port}"  # [::] takes IPv4 too
    channel = grpc.insecure_channel(address)
    try:
        # no relisting during a test: the UFS listing would change what a refused call left
        volumes.create(VolumeSpec(name=VOLUME, ufs_uri="memory://fuzz", meta_ttl=3600.0))
        yield Tree(server, channel, store, tracebacks, address)
    finally:
        channel.close()
        server.stop(0)
        volumes.close()
        engine.close()
        logger.removeHandler(tracebacks)
