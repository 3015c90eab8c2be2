"""Mirroring a UFS directory into the tree: list it fully, then merge in one transaction.

The listing is taken outside any KV transaction (it may take seconds); the
merge then runs in a single write transaction however large the directory
(a 10,000-entry directory is one commit, not 10,000). Merge rules:

* a new name becomes a new ufs-backed inode (files: size/mtime/etag from the
  listing; directories: never listed yet);
* a ufs-backed file whose etag or size changed takes the new size, mtime and
  etag, keeping mode, owner and xattrs: how a change made behind the mount's
  back shows up after the TTL;
* a ufs-backed entry missing from the listing is removed, unless it is open;
  for a directory, its ufs-backed contents are pruned recursively and the
  directory itself goes only if nothing tree-only or open is left in it;
* tree-only entries are kept: symlinks, fifos, sockets, devices, secondary
  hard-link names, and files created through the mount but not uploaded yet;
* so are files whose newer bytes wait in the write-back journal (``pending``);
* a name that is both an object and a prefix is a directory;
* a name a change in flight has reserved is left as it is (``reserve``): the
  UFS may already show what the tree does not yet, or the other way round.

The merge also says what a kernel that cached the old state must forget
(``MergeChanges``, an ``Invalidation``): files whose ETag or size changed,
names that went away, names that came (a cached negative lookup) unless the
directory was never listed, and the directory itself when its entries changed.
"""

from __future__ import annotations

import logging
import stat
from dataclasses import dataclass, field, replace

from cloudfs.meta.engine import codec, reserve, tree
from cloudfs.meta.engine.codec import InodeRecord
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.names import is_valid_name, str_to_name
from cloudfs.meta.engine.settings import TreeSettings
from cloudfs.meta.engine.store_calls import call_store
from cloudfs.meta.interface import Invalidation
from cloudfs.types import InodeId, ObjectInfo
from cloudfs.ufs.interface import ObjectStore

log = logging.getLogger(__name__)

# name -> the object for a file, None for a directory.
Listing = dict[bytes, ObjectInfo | None]
LIST_PAGE_SIZE = 1000


@dataclass
class MergeChanges:
    """What one merge changed that a kernel may have cached."""

    inodes: set[int] = field(default_factory=set)
    entries: set[tuple[int, bytes]] = field(default_factory=set)  # (parent, name)

    def to_invalidation(self) -> Invalidation | None:
        """The changes as an ``Invalidation`` (None when nothing changed)."""
        if not self.inodes and not self.entries:
            return None
        return Invalidation(
            inodes=tuple(InodeId(i) for i in sorted(self.inodes)),
            entries=tuple((InodeId(p), n) for p, n in sorted(self.entries)),
        )


def _entry_name(base: str, key: str) -> bytes | None:
    rest = key[len(base) :] if key.startswith(base) else key.rsplit("/", 1)[-1]
    name = str_to_name(rest.rstrip("/"))
    if not is_valid_name(name):
        log.debug("skipping UFS entry %r: not a valid POSIX name", key)
        return None
    return name


def list_directory(store: ObjectStore, key: str, page_size: int = LIST_PAGE_SIZE) -> Listing:
    """Every entry directly under directory ``key``, all pages."""
    base = f"{key}/" if key else ""
    entries: Listing = {}
    token: str | None = None
    while True:
        page = call_store(store.list_dir, key, token, page_size)
        for prefix in page.prefixes:
            name = _entry_name(base, prefix)
            if name is not None:
                entries[name] = None
        for obj in page.objects:
            name = _entry_name(base, obj.key)
            if name is None:
                continue
            if obj.is_dir:
                entries[name] = None
            elif name not in entries:
                entries[name] = obj
        token = page.next_token
        if token is None:
            return entries


def new_record(
    info: ObjectInfo | None, parent: int, name: bytes, now: int, settings: TreeSettings
) -> InodeRecord:
    """The record of an inode first seen in a listing (``info`` None: a directory)."""
    if info is None:
        return InodeRecord(
            mode=settings.dir_type_mode,
            nlink=2,
            uid=settings.default_uid,
            gid=settings.default_gid,
            size=0,
            atime_ns=now,
            mtime_ns=now,
            ctime_ns=now,
            parent=parent,
            name=name,
            ufs=True,
        )
    return InodeRecord(
        mode=settings.file_type_mode,
        nlink=1,
        uid=settings.default_uid,
        gid=settings.default_gid,
        size=info.size,
        atime_ns=info.mtime_ns,
        mtime_ns=info.mtime_ns,
        ctime_ns=info.mtime_ns,
        etag=info.etag,
        parent=parent,
        name=name,
        ufs=True,
    )


def prune(txn: KVTxn, dir_ino: int, now: int, seen: MergeChanges | None = None) -> bool:
    """Drop a vanished directory's ufs-backed, unopened contents; True if it is now empty.

    ``seen`` collects the names dropped."""
    seen = MergeChanges() if seen is None else seen
    busy = reserve.reserved_names(txn, dir_ino, now)
    for name, ino in tree.children(txn, dir_ino):
        if name in busy:
            continue
        rec = tree.load(txn, ino)
        if stat.S_ISDIR(rec.mode):
            if rec.ufs and prune(txn, ino, now, seen):
                tree.remove_dir_entry(txn, dir_ino, name, ino)
                seen.entries.add((dir_ino, name))
        elif _removable_file(txn, dir_ino, name, ino, rec):
            tree.drop_name(txn, dir_ino, name, ino, rec, now)
            seen.entries.add((dir_ino, name))
    return not tree.has_children(txn, dir_ino)


def _removable_file(txn: KVTxn, parent: int, name: bytes, ino: int, rec: InodeRecord) -> bool:
    return rec.ufs and tree.is_primary(rec, parent, name) and tree.open_count(txn, ino) == 0


def _add(
    txn: KVTxn, dir_ino: int, name: bytes, info: ObjectInfo | None, now: int, s: TreeSettings
) -> int:
    ino = tree.alloc_inodes(txn, 1)
    tree.save(txn, ino, new_record(info, dir_ino, name, now, s))
    tree.add_name(txn, dir_ino, name, ino)
    return 1 if info is None else 0


def _reconcile(
    txn: KVTxn,
    dir_ino: int,
    name: bytes,
    ino: int,
    listed: bool,
    info: ObjectInfo | None,
    now: int,
    s: TreeSettings,
    seen: MergeChanges,
) -> int:
    """Bring one existing entry in line with the listing; returns the subdirectory delta."""
    rec = tree.load(txn, ino)
    is_dir = stat.S_ISDIR(rec.mode)
    if not rec.ufs or rec.pending or (not is_dir and not tree.is_primary(rec, dir_ino, name)):
        return 0  # tree-only, or newer bytes wait for upload: the listing has no say
    if is_dir:
        if listed and info is None:
            return 0
        if not prune(txn, ino, now, seen):
            return 0
        tree.remove_dir_entry(txn, dir_ino, name, ino, adjust_parent=False)
        return -1 + (_add(txn, dir_ino, name, info, now, s) if listed else 0)
    if listed and info is not None:
        if info.etag != rec.etag or info.size != rec.size:
            tree.save(
                txn,
                ino,
                replace(rec, size=info.size, mtime_ns=info.mtime_ns, etag=info.etag, ctime_ns=now),
            )
            seen.inodes.add(ino)
        return 0
    if tree.open_count(txn, ino) > 0:
        return 0
    tree.drop_name(txn, dir_ino, name, ino, rec, now)
    return _add(txn, dir_ino, name, info, now, s) if listed else 0


def entry_versions(txn: KVTxn, dir_ino: int) -> dict[bytes, tuple[int, bytes]]:
    """Every entry of directory ``dir_ino``: name -> (inode, its encoded record)."""
    entries = tree.children(txn, dir_ino)
    found = txn.get_many([codec.inode_key(ino) for _, ino in entries])
    return {name: (ino, data or b"") for (name, ino), data in zip(entries, found, strict=True)}


def merge_listing(
    txn: KVTxn,
    dir_ino: int,
    listing: Listing,
    now: int,
    settings: TreeSettings,
    trust: dict[bytes, tuple[int, bytes]] | None = None,
) -> MergeChanges:
    """Merge a full listing of directory ``dir_ino`` and mark it loaded at ``now``.

    ``trust``: the entries as they were when the listing began (``entry_versions``);
    when given, a name whose entry changed since (made, removed, renamed, uploaded)
    is left as it is. Returns what a kernel that cached the directory must forget."""
    listed_before = tree.load_dir(txn, dir_ino).loaded_at_ns != 0
    seen = MergeChanges()
    busy = reserve.reserved_names(txn, dir_ino, now)  # the UFS may be half-way through them
    if trust is not None:
        current = entry_versions(txn, dir_ino)
        busy |= {n for n in current.keys() | trust.keys() if current.get(n) != trust.get(n)}
    existing = {n: i for n, i in tree.children(txn, dir_ino) if n not in busy}
    listing = {n: info for n, info in listing.items() if n not in busy}
    tree.find_many(txn, list(existing.values()))  # what _reconcile reads: 128 to a round trip
    delta = 0
    changed = False
    new_names = sorted(name for name in listing if name not in existing)
    if new_names:
        changed = True
        ino = tree.alloc_inodes(txn, len(new_names))
        for name in new_names:
            info = listing[name]
            tree.save(txn, ino, new_record(info, dir_ino, name, now, settings))
            tree.add_name(txn, dir_ino, name, ino)
            delta += 1 if info is None else 0
            ino += 1
            if listed_before:  # a kernel may hold a negative entry for the name
                seen.entries.add((dir_ino, name))
    for name, ino in existing.items():
        listed = name in listing
        delta += _reconcile(txn, dir_ino, name, ino, listed, listing.get(name), now, settings, seen)
        if tree.child(txn, dir_ino, name) != ino:
            changed = True
            seen.entries.add((dir_ino, name))
    rec = tree.load(txn, dir_ino)
    rec = replace(rec, loaded_at_ns=now, nlink=max(2, rec.nlink + delta))
    if changed:
        rec = replace(rec, mtime_ns=now, ctime_ns=now)
        seen.inodes.add(dir_ino)
    tree.save(txn, dir_ino, rec)
    return seen
