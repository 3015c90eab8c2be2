"""Replay: a detached mount's journaled changes sent to the tree service, in order.

Each change is one tree call; the tree's rules settle what happened meanwhile:
a create whose name another mount took lands beside it as
``NAME.detached-INODE`` (in the volume's root if its directory is gone); a
create sent before whose answer was lost is found under its name and number; a
rename or unlink whose name no longer holds the file is not made (the first is
reported, the second is what was wanted). ``DetachedWrites.replay`` counts and
logs every conflict.
"""

from __future__ import annotations

import logging
from typing import Any

from cloudfs.errors import AlreadyExists, NotFound
from cloudfs.meta.client.change_log import LoggedChange
from cloudfs.meta.client.detached import DetachedReads
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.types import ROOT_INODE, AttrChanges, InodeId

log = logging.getLogger(__name__)
Entry = tuple[InodeId, bytes]


class Replay:
    """One replay's view: where each file the journal made landed (a conflict moves it)."""

    def __init__(self, tree: GrpcMeta, reads: DetachedReads) -> None:
        self._tree = tree
        self._reads = reads
        self._at: dict[int, Entry] = {}  # inode -> its name now, where a conflict moved it
        self.conflicts = 0

    def _source(self, change: LoggedChange) -> Entry:
        """The name ``change`` acts on: where the journal said, or where a conflict put it."""
        f = change.fields
        return self._at.get(f["inode"], (InodeId(f["parent"]), bytes.fromhex(f["name"])))

    def _holds(self, entry: Entry, inode: int) -> bool:
        try:
            return self._reads.lookup(*entry).inode == inode
        except NotFound:
            return False

    def apply(self, change: LoggedChange) -> None:
        f = change.fields
        inode = InodeId(f["inode"])
        if change.op == "create":
            self._create(InodeId(f["parent"]), bytes.fromhex(f["name"]), f, inode)
        elif change.op in ("pending", "setattr"):
            try:
                if change.op == "pending":
                    self._reads.commit_pending(inode, f["size"], f["mtime_ns"])
                else:
                    self._reads.setattr(inode, AttrChanges(**f["changes"]))
            except NotFound:
                pass  # removed meanwhile
        elif change.op == "unlink":
            entry = self._source(change)
            if self._holds(entry, inode):  # else removed or replaced meanwhile: leave it
                self._reads.unlink(*entry)
        elif change.op == "rename":
            entry = self._source(change)
            if not self._holds(entry, inode):
                raise NotFound(f"rename of inode {inode}: {entry[1]!r} is not it any more")
            target = (InodeId(f["new_parent"]), bytes.fromhex(f["new_name"]))
            self._reads.rename(*entry, *target)
            self._at[inode] = target

    def _create(self, parent: InodeId, name: bytes, f: dict[str, Any], inode: InodeId) -> None:
        def at(where: InodeId, called: bytes) -> None:
            self._tree.create_at(where, called, f["mode"], f["uid"], f["gid"], inode)
            self._reads.forget((), ((where, called),))
            self._at[inode] = (where, called)

        try:
            at(parent, name)
            return
        except AlreadyExists:
            if self._holds((parent, name), inode):
                self._at[inode] = (parent, name)
                return  # sent before, its answer lost
        except NotFound:  # its directory is gone: the file goes to the root
            parent = ROOT_INODE
        self.conflicts += 1
        moved = name + f".detached-{inode}".encode()
        log.warning("journaled create of %r: the name was taken meanwhile; kept as %r", name, moved)
        at(parent, moved)
