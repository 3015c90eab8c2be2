"""DetachedWrites: a write-back mount keeps changing its tree while the service is away.

It wraps ``DetachedReads``. While every tree server is unreachable (and after,
until the journal is replayed), the namespace changes a writer makes go to a
local journal (``ChangeLog``, fsync-ed before each is answered) and are
answered from what the mount knows:

* create (``create_open``) and mkdir take an inode number the service reserved
  for this mount beforehand (``ReserveInodes``, ``RESERVE`` at a time), so the
  kernel's inode numbers stay right after the replay;
* rename and unlink of files, setattr, and a closed file's pending size
  (``commit_pending``); an open for writing of a file the mount knows;
* a name can be created only where the mount knows it is free: the directory
  was listed through this mount (or made while detached), so a name missing
  from that listing is answered ENOENT; elsewhere a lookup of an unknown name
  still fails with EIO.

Anything else (symlink, link, rmdir, xattrs, moving a directory) fails with EIO
as before. A closed file's bytes wait in the write-back journal: the uploader's
``object_key(upload=True)`` is refused for a name the tree does not know yet, and
every commit while changes wait, so nothing is put or committed (the uploader
retries with back-off) before the replay; a close still gets the key.

When the service is back the journal is replayed in order, one tree call per
change (``CreateAt`` under the reserved number), before any later change is
sent. The tree's rules decide conflicts, which are logged and counted, never
silently dropped: a name another mount took meanwhile keeps its file, and
ours lands beside it as ``NAME.detached-INODE``; a rename or unlink whose
file changed meanwhile is skipped. A mount that dies detached replays its
journal when it mounts again, before its write-back journal uploads.
"""

from __future__ import annotations

import dataclasses
import logging
import stat
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TypeVar

from cloudfs.errors import AlreadyExists, FsError, NotFound, TreeUnreachable
from cloudfs.meta.client.change_log import ChangeLog
from cloudfs.meta.client.detached import DetachedReads
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.client.listings import Listings
from cloudfs.meta.client.replay import Replay
from cloudfs.meta.engine.names import child_key
from cloudfs.meta.interface import Invalidation
from cloudfs.types import Attr, AttrChanges, DirEntry, FsStats, InodeId

log = logging.getLogger(__name__)

RESERVE = 4096  # inode numbers reserved at a time: new names a mount can make detached
T = TypeVar("T")
Entry = tuple[InodeId, bytes]


class DetachedWrites:
    local_reads = False

    def __init__(self, reads: DetachedReads, tree: GrpcMeta, journal: ChangeLog) -> None:
        self._reads = reads
        self._tree = tree
        self._log = journal
        self._order = threading.RLock()  # changes wait for a replay in progress
        self._listings = Listings()
        self._attrs: dict[InodeId, Attr] = {}  # inodes a journaled change touched
        self._names: dict[Entry, InodeId | None] = {}  # names it set (None: removed)
        self._keys: dict[InodeId, str] = {}  # UFS keys of what it made
        self._local_opens: Counter[InodeId] = Counter()
        self.conflicts = 0
        # Called (in the replay's thread) after a replay sent journaled changes.
        self.on_replayed: list[Callable[[], None]] = []
        reads.on_attached.append(self._attached)

    # -- the session, as DetachedReads' -------------------------------------------

    @property
    def session(self) -> str:
        return self._reads.session

    @property
    def detached_since(self) -> float | None:
        return self._reads.detached_since

    @property
    def journaled(self) -> int:
        """Changes waiting to be replayed."""
        return len(self._log.pending)

    def start_session(self) -> None:
        self._reads.start_session()
        self.replay()
        self._top_up()

    def changes(self) -> Iterator[Invalidation]:
        return self._reads.changes()

    def close(self) -> None:
        self._reads.close()
        self._log.close()

    def _attached(self) -> None:
        threading.Thread(target=self._replay_quietly, name="cloudfs-replay", daemon=True).start()

    def _replay_quietly(self) -> None:
        try:
            self.replay()
            self._top_up()
        except FsError as exc:
            log.warning("journaled changes not replayed yet: %s", exc)

    def _top_up(self) -> None:
        if len(self._log.numbers) >= RESERVE // 2:
            return
        try:
            first = self._tree.reserve_inodes(RESERVE)
        except TreeUnreachable:
            return
        except FsError as exc:  # an older server: detached creates fail with EIO
            log.info("no inode numbers reserved for detached creates: %s", exc)
            return
        self._log.add_numbers(first, RESERVE)

    # -- journaled or sent ---------------------------------------------------------

    def _journaling(self) -> bool:
        """Whether a change now goes to the journal (the order lock held): the service
        is away, or changes made while it was are not all replayed and cannot be now."""
        if self._reads.detached_since is not None:
            return True
        if self._log.pending:
            try:
                self.replay()
            except TreeUnreachable:
                return True
        return False

    def _change(self, sent: Callable[[], T], journaled: Callable[[], T]) -> T:
        if not self._log.pending and self._reads.detached_since is None:
            try:
                return sent()
            except TreeUnreachable:
                pass  # DetachedReads detached: journal it below
        with self._order:
            return journaled() if self._journaling() else sent()

    # -- reads: what the journal changed first --------------------------------------

    def _overlaid(self, attr: Attr) -> Attr:
        return self._attrs.get(attr.inode, attr)

    def lookup(self, parent: InodeId, name: bytes) -> Attr:
        entry = (parent, name)
        if entry in self._names:
            inode = self._names[entry]
            if inode is None:
                raise NotFound(f"{name!r}")
            return self._attrs[inode]
        try:
            return self._overlaid(self._reads.lookup(parent, name))
        except TreeUnreachable:
            if self._listings.lacks(parent, name):
                raise NotFound(f"{name!r}: not in this mount's listing") from None
            raise

    def lookup_if_listed(self, parent: InodeId, name: bytes) -> Attr | None:
        if (parent, name) in self._names or self._reads.detached_since is not None:
            try:
                return self.lookup(parent, name)
            except NotFound:
                return None
        found = self._reads.lookup_if_listed(parent, name)
        return None if found is None else self._overlaid(found)

    def getattr(self, inode: InodeId) -> Attr:
        if inode in self._attrs:
            return self._attrs[inode]
        return self._reads.getattr(inode)

    def readdir(self, inode: InodeId, after: bytes | None, limit: int) -> list[DirEntry]:
        names = self._listings.names(inode) if self._changed_in(inode) else None
        if names is not None:  # the journal changed it: its names as this mount knows them
            wanted = [n for n in names if after is None or n > after][:limit]
            return [DirEntry(n, self.lookup(inode, n)) for n in wanted]
        entries = self._reads.readdir(inode, after, limit)
        self._listings.page(inode, after, limit, [e.name for e in entries])
        return [replace(e, attr=self._overlaid(e.attr)) for e in entries]

    def _changed_in(self, parent: InodeId) -> bool:
        return any(p == parent for p, _ in list(self._names))

    def readlink(self, inode: InodeId) -> bytes:
        return self._reads.readlink(inode)

    def getxattr(self, inode: InodeId, name: bytes) -> bytes:
        return self._reads.getxattr(inode, name)

    def listxattr(self, inode: InodeId) -> list[bytes]:
        return self._reads.listxattr(inode)

    def statfs(self) -> FsStats:
        return self._reads.statfs()

    def object_key(self, inode: InodeId, *, upload: bool = False) -> str:
        if inode not in self._keys:
            return self._reads.object_key(inode)
        if upload:  # no bytes put under a name the tree does not know yet
            raise TreeUnreachable(f"inode {inode}: its journaled name is not replayed yet")
        return self._keys[inode]

    def _key_in(self, parent: InodeId, name: bytes) -> str:
        """The UFS key ``name`` has in ``parent`` (EIO if the mount does not know it)."""
        return child_key(self._keys.get(parent) or self._reads.object_key(parent), name)

    def open(self, inode: InodeId, *, write: bool = False) -> Attr:
        """An open answered here (detached, or of a file the journal touched) is counted
        here, and so is its release: the tree never counted it."""
        if inode in self._attrs or self._reads.detached_since is not None:
            known = write or inode in self._attrs  # then known to this mount, or EIO
            attr = self.getattr(inode) if known else self._reads.open(inode)
            self._local_opens[inode] += 1
            return attr
        return self._overlaid(self._reads.open(inode, write=write))

    def release(self, inode: InodeId) -> None:
        if self._local_opens[inode] > 0:
            self._local_opens[inode] -= 1
            return
        self._reads.release(inode)

    def refresh(self, inode: InodeId) -> Invalidation:
        return self._reads.refresh(inode)

    # -- changes ---------------------------------------------------------------------

    def create_open(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int
    ) -> tuple[Attr, str]:
        def sent() -> tuple[Attr, str]:
            attr, key = self._reads.create_open(parent, name, mode, uid, gid)
            self._listings.added(parent, name)
            return attr, key

        return self._change(sent, lambda: self._made(parent, name, stat.S_IFREG | mode, uid, gid))

    def mkdir(self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int) -> Attr:
        def sent() -> Attr:
            attr = self._reads.mkdir(parent, name, mode, uid, gid)
            self._listings.added(parent, name)
            return attr

        return self._change(sent, lambda: self._made(parent, name, mode, uid, gid)[0])

    def _made(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int
    ) -> tuple[Attr, str]:
        try:
            self.lookup(parent, name)
        except NotFound:
            pass
        else:
            raise AlreadyExists(f"{name!r} exists")
        key = self._key_in(parent, name)
        inode = self._log.take_number()
        if inode is None:
            raise TreeUnreachable("no inode numbers reserved for creates while detached")
        now = time.time_ns()
        directory = stat.S_ISDIR(mode)
        attr = Attr(InodeId(inode), mode, 2 if directory else 1, uid, gid, 0, now, now, now)
        self._log.add(
            "create", parent=parent, name=name.hex(), mode=mode, uid=uid, gid=gid,
            inode=inode, made=True,
        )  # fmt: skip
        self._attrs[attr.inode] = attr
        self._names[(parent, name)] = attr.inode
        self._keys[attr.inode] = key
        self._listings.added(parent, name)
        if directory:
            self._listings.made(attr.inode)
        else:
            self._local_opens[attr.inode] += 1  # held by its creator, as CreateOpen would
        return attr, key

    def setattr(self, inode: InodeId, changes: AttrChanges) -> Attr:
        def journaled() -> Attr:
            known = self.getattr(inode)
            attr = replace(known, **changes.applied(known, time.time_ns()))
            fields = {k: v for k, v in dataclasses.asdict(changes).items() if v is not None}
            self._log.add("setattr", inode=inode, changes=fields)
            self._attrs[inode] = attr
            return attr

        return self._change(lambda: self._reads.setattr(inode, changes), journaled)

    def commit_pending(self, inode: InodeId, size: int, mtime_ns: int) -> Attr:
        def journaled() -> Attr:
            attr = replace(self.getattr(inode), size=size, mtime_ns=mtime_ns, ctime_ns=mtime_ns)
            self._log.add("pending", inode=inode, size=size, mtime_ns=mtime_ns)
            self._attrs[inode] = attr
            return attr

        return self._change(lambda: self._reads.commit_pending(inode, size, mtime_ns), journaled)

    def commit_upload(
        self, inode: InodeId, size: int, mtime_ns: int, etag: str, key: str | None = None
    ) -> Attr:
        def waits() -> Attr:
            raise TreeUnreachable(f"inode {inode}: changes made while detached are not replayed")

        return self._change(
            lambda: self._reads.commit_upload(inode, size, mtime_ns, etag, key), waits
        )

    def unlink(self, parent: InodeId, name: bytes) -> Attr:
        def sent() -> Attr:
            attr = self._reads.unlink(parent, name)
            self._listings.removed(parent, name)
            return attr

        def journaled() -> Attr:
            attr = self.lookup(parent, name)
            if attr.is_dir:
                raise TreeUnreachable("unlink of a directory")  # the tree refuses it anyway
            self._log.add("unlink", parent=parent, name=name.hex(), inode=attr.inode)
            attr = replace(attr, nlink=max(0, attr.nlink - 1))
            self._attrs[attr.inode] = attr
            self._names[(parent, name)] = None
            self._listings.removed(parent, name)
            return attr

        return self._change(sent, journaled)

    def rename(
        self, parent: InodeId, name: bytes, new_parent: InodeId, new_name: bytes, flags: int = 0
    ) -> None:
        def sent() -> None:
            self._reads.rename(parent, name, new_parent, new_name, flags)
            self._listings.removed(parent, name)
            self._listings.added(new_parent, new_name)

        def journaled() -> None:
            moved = self.lookup(parent, name)
            if moved.is_dir or flags:
                raise TreeUnreachable("rename of a directory, or with flags")
            try:
                victim: Attr | None = self.lookup(new_parent, new_name)
            except NotFound:
                victim = None
            if victim is not None and victim.is_dir:
                raise TreeUnreachable("rename onto a directory")
            key = self._key_in(new_parent, new_name)
            self._log.add(
                "rename", parent=parent, name=name.hex(), new_parent=new_parent,
                new_name=new_name.hex(), inode=moved.inode,
            )  # fmt: skip
            if victim is not None:
                self._attrs[victim.inode] = replace(victim, nlink=max(0, victim.nlink - 1))
            self._attrs[moved.inode] = moved
            self._names[(parent, name)] = None
            self._names[(new_parent, new_name)] = moved.inode
            self._keys[moved.inode] = key
            self._listings.removed(parent, name)
            self._listings.added(new_parent, new_name)

        self._change(sent, journaled)

    # -- not journaled: EIO while detached -------------------------------------------

    def _sent_only(self, call: Callable[[], T]) -> T:
        def refused() -> T:
            raise TreeUnreachable("not made while the tree service is unreachable")

        return self._change(call, refused)

    def create(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int, rdev: int = 0
    ) -> Attr:
        return self._sent_only(lambda: self._reads.create(parent, name, mode, uid, gid, rdev))

    def create_if_ready(
        self, parent: InodeId, name: bytes, mode: int, uid: int, gid: int
    ) -> Attr | None:
        return None

    def symlink(self, parent: InodeId, name: bytes, target: bytes, uid: int, gid: int) -> Attr:
        return self._sent_only(lambda: self._reads.symlink(parent, name, target, uid, gid))

    def link(self, inode: InodeId, new_parent: InodeId, new_name: bytes) -> Attr:
        return self._sent_only(lambda: self._reads.link(inode, new_parent, new_name))

    def rmdir(self, parent: InodeId, name: bytes) -> None:
        self._sent_only(lambda: self._reads.rmdir(parent, name))
        self._listings.removed(parent, name)

    def setxattr(self, inode: InodeId, name: bytes, value: bytes, flags: int = 0) -> None:
        self._sent_only(lambda: self._reads.setxattr(inode, name, value, flags))

    def removexattr(self, inode: InodeId, name: bytes) -> None:
        self._sent_only(lambda: self._reads.removexattr(inode, name))

    # -- the replay ------------------------------------------------------------------

    def replay(self) -> None:
        """Send every journaled change, in order (``TreeUnreachable``: stopped, the rest
        stays journaled)."""
        with self._order:
            if not self._log.pending:
                return
            count = len(self._log.pending)
            replayer = Replay(self._tree, self._reads)
            for change in list(self._log.pending):
                try:
                    replayer.apply(change)
                except TreeUnreachable:
                    raise
                except FsError as exc:
                    self.conflicts += 1
                    log.warning("journaled %s not replayed (conflict): %s", change.op, exc)
                self._log.done(change)
            self.conflicts += replayer.conflicts
            self._attrs.clear()
            self._names.clear()
            self._keys.clear()
            self._log.compact()
            for hook in self.on_replayed:
                hook()
            log.warning(
                "replayed %d change(s) made while the tree service was away (%d conflicts)",
                count, self.conflicts,
            )  # fmt: skip
