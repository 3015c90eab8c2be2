"""A tree invariant checker: walk a volume's whole tree and say everything that is wrong.

``check_tree(meta, kv)`` asserts, for a tree nobody is changing at the moment:

Through the Meta API (``GrpcMeta``, ``EmbeddedMeta``: what mounts see):

* every directory's listing (``readdir``, page by page) has strictly
  increasing names, so no name twice, and every listed name looks up to the
  same inode and file type, and getattr of that inode agrees;
* a directory is reached through one name only (no directory hard links,
  no cycles), never below itself;
* nlink: a non-directory's equals the number of names it has in the tree; a
  directory's is 2 + its subdirectories.

Through the engine's keys (``kv``: the tree's keys, a ``PrefixedKV`` at the
volume's ``T<tree id>``, see ``tree_kv``), read in one snapshot, where the API
cannot show things:

* every dentry names an existing inode record, in a directory;
* every record but the root is reachable from the root through dentries,
  except orphans (nlink 0, still open: an ``O`` count and a ``P`` marker),
  which have no names and no parent;
* each record's primary name (parent, name) is one of its dentries; a
  directory has exactly that one; a file's other names are exactly its ``L``
  secondary-link keys;
* nlink (again, from the keys); ``L``, ``X``, ``S``, ``O``, ``P`` keys belong
  to existing records (``S`` to symlinks, which all have one);
* a shared tree's per-inode open counts are the sums of its sessions' ones;
* the inode counter (with its shards) counts the records, and the next inode
  number is above all of them;
* no reservation (``R``) is left behind;
* the API's view and the keys' view are the same set of (parent, name, inode).
"""

from __future__ import annotations

import itertools
import json
import stat
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Protocol

from cloudfs.errors import FsError
from cloudfs.meta.engine import codec
from cloudfs.meta.engine.codec import InodeRecord
from cloudfs.meta.engine.kv import KVEngine
from cloudfs.meta.engine.kv_prefixed import PrefixedKV
from cloudfs.meta.service.volumes import TREE_PREFIX, VOLUME_PREFIX
from cloudfs.types import ROOT_INODE, Attr, DirEntry, InodeId

PAGE = 64
MAX_PROBLEMS_SHOWN = 40


class TreeReader(Protocol):
    """The part of the Meta protocol the checker reads through."""

    def lookup(self, parent: InodeId, name: bytes) -> Attr: ...

    def getattr(self, inode: InodeId) -> Attr: ...

    def readdir(self, inode: InodeId, after: bytes | None, limit: int) -> list[DirEntry]: ...


Entry = tuple[int, bytes, int]  # (parent, name, inode)


@dataclass
class TreeReport:
    """What the walk saw; ``problems`` is empty for a sound tree."""

    inodes: dict[int, Attr] = field(default_factory=dict)  # reached through the API
    entries: set[Entry] = field(default_factory=set)  # through the API
    kv_entries: set[Entry] = field(default_factory=set)  # through the keys
    records: int = 0  # inode records in the keys
    orphans: set[int] = field(default_factory=set)  # held open, nameless
    problems: list[str] = field(default_factory=list)

    @property
    def directories(self) -> int:
        return sum(1 for a in self.inodes.values() if stat.S_ISDIR(a.mode))

    def summary(self) -> str:
        return (
            f"{len(self.inodes)} inodes ({self.directories} directories), "
            f"{len(self.entries)} names, {len(self.orphans)} open orphans"
        )


def tree_kv(engine: KVEngine, tree_id: str) -> PrefixedKV:
    """The keys of one volume's tree (``VolumeSpec.tree_id``) in the service's engine."""
    return PrefixedKV(engine, TREE_PREFIX + bytes.fromhex(tree_id))


def volume_tree_id(engine: KVEngine, volume: str) -> str:
    """The tree id of ``volume``, from its record in the engine (the API does not send it)."""
    with engine.transaction(write=False) as txn:
        raw = txn.get(VOLUME_PREFIX + volume.encode())
    assert raw is not None, f"no volume record for {volume!r}"
    tree_id: str = json.loads(raw)["tree_id"]
    assert tree_id, f"volume {volume!r} has no tree id"
    return tree_id


def check_tree(
    meta: TreeReader, kv: KVEngine | None = None, *, page: int = PAGE, raise_: bool = True
) -> TreeReport:
    """Walk the whole tree; raise ``AssertionError`` naming every problem (unless ``raise_``
    is false: then the report lists them)."""
    report = TreeReport()
    _walk_api(meta, report, page)
    if kv is not None:
        _check_keys(kv, report)
    if report.problems and raise_:
        shown = report.problems[:MAX_PROBLEMS_SHOWN]
        more = len(report.problems) - len(shown)
        raise AssertionError(
            f"tree check: {len(report.problems)} problem(s) in {report.summary()}:\n  "
            + "\n  ".join(shown)
            + (f"\n  ... and {more} more" if more > 0 else "")
        )
    return report


def _same_kind(a: int, b: int) -> bool:
    return stat.S_IFMT(a) == stat.S_IFMT(b)


def _walk_api(meta: TreeReader, report: TreeReport, page: int) -> None:
    bad = report.problems.append
    try:
        root = meta.getattr(InodeId(ROOT_INODE))
    except FsError as exc:
        bad(f"getattr(root): {exc!r}")
        return
    if not root.is_dir:
        bad(f"the root is not a directory: mode {root.mode:o}")
        return
    report.inodes[ROOT_INODE] = root
    dir_parent: dict[int, int] = {ROOT_INODE: ROOT_INODE}
    subdirs: Counter[int] = Counter()
    names: Counter[int] = Counter()
    queue: list[int] = [ROOT_INODE]
    while queue:
        d = queue.pop(0)
        listed: list[DirEntry] = []
        after: bytes | None = None
        try:
            for _ in range(100_000):
                batch = meta.readdir(InodeId(d), after, page)
                if not batch:
                    break
                listed += batch
                after = batch[-1].name
        except FsError as exc:
            bad(f"readdir({d}): {exc!r}")
            continue
        for previous, current in itertools.pairwise(listed):
            if current.name <= previous.name:
                what = "twice" if current.name == previous.name else "out of order"
                bad(f"directory {d}: name {current.name!r} listed {what}")
        for entry in listed:
            ino = int(entry.attr.inode)
            report.entries.add((d, entry.name, ino))
            names[ino] += 1
            try:
                looked = meta.lookup(InodeId(d), entry.name)
            except FsError as exc:
                bad(f"directory {d} lists {entry.name!r} (inode {ino}) but lookup says {exc!r}")
                continue
            if int(looked.inode) != ino or not _same_kind(looked.mode, entry.attr.mode):
                bad(
                    f"directory {d}: {entry.name!r} listed as inode {ino} mode "
                    f"{entry.attr.mode:o}, looked up as {looked.inode} mode {looked.mode:o}"
                )
            if not looked.is_dir:
                report.inodes.setdefault(ino, looked)
                continue
            subdirs[d] += 1
            if ino in dir_parent:
                first = dir_parent[ino]
                bad(
                    f"directory {ino} has a second name {entry.name!r} in {d} "
                    f"(first reached from {first}): a directory link or a cycle"
                )
                continue
            dir_parent[ino] = d
            report.inodes[ino] = looked
            queue.append(ino)
    for ino, attr in list(report.inodes.items()):
        try:
            now = meta.getattr(InodeId(ino))
        except FsError as exc:
            bad(f"inode {ino} is named but getattr says {exc!r}")
            continue
        report.inodes[ino] = now
        if not _same_kind(now.mode, attr.mode):
            bad(f"inode {ino}: lookup gave mode {attr.mode:o}, getattr {now.mode:o}")
        expected = 2 + subdirs[ino] if now.is_dir else names[ino]
        if now.nlink != expected:
            what = "2 + subdirectories" if now.is_dir else "names"
            bad(f"inode {ino} (mode {now.mode:o}): nlink {now.nlink}, {what} {expected}")


def _check_keys(kv: KVEngine, report: TreeReport) -> None:
    bad = report.problems.append
    records: dict[int, InodeRecord] = {}
    dentries: dict[tuple[int, bytes], int] = {}
    links: set[tuple[int, int, bytes]] = set()
    owned: dict[bytes, set[int]] = defaultdict(set)  # key kind -> inodes with such keys
    opens: dict[int, int] = {}
    held: Counter[int] = Counter()  # opens per inode, summed over sessions
    counters: dict[bytes, int] = {}
    shards = 0  # the inode counter's shards, summed
    with kv.transaction(write=False) as txn:
        everything = list(txn.scan(b""))
    for key, value in everything:
        kind = key[:1]
        if key.startswith(codec.INODE_COUNT_KEY + b"/"):
            shards += int.from_bytes(value, "big", signed=True)
        elif key.startswith(b"C:"):
            counters[key] = codec.from_u64(value) if len(value) == 8 else -1
        elif kind == b"I" and len(key) == 9:
            try:
                records[codec.from_u64(key[1:])] = codec.decode_inode(value)
            except (FsError, ValueError, UnicodeDecodeError) as exc:
                bad(f"record {key!r} does not decode: {exc!r}")
        elif kind == b"D" and len(key) > 9:
            dentries[(codec.from_u64(key[1:9]), key[9:])] = codec.from_u64(value)
        elif kind == b"L" and len(key) > 17:
            parent, name = codec.split_link_key(key)
            links.add((codec.from_u64(key[1:9]), parent, name))
        elif kind in (b"X", b"S", b"O", b"P", b"V") and len(key) >= 9:
            ino = codec.from_u64(key[1:9])
            owned[kind].add(ino)
            if kind == b"O":
                opens[ino] = codec.from_u64(value)
        elif kind == b"Q" and len(key) >= 10 and len(key) == 2 + key[1] + 8:
            held[codec.from_u64(key[-8:])] += codec.from_u64(value)  # one session's opens
        elif kind == b"R":  # held only while a change is under way
            bad(f"reservation {key!r} left behind")
        elif kind != b"Z":  # Z: sessions' expiries
            bad(f"unknown key {key!r} in the tree")
    report.records = len(records)
    report.kv_entries = {(p, n, i) for (p, n), i in dentries.items()}

    if ROOT_INODE not in records:
        bad("no root record")
        return
    names_of: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    children: dict[int, list[int]] = defaultdict(list)
    for (parent, name), ino in sorted(dentries.items()):
        names_of[ino].append((parent, name))
        children[parent].append(ino)
        if ino not in records:
            bad(f"dentry ({parent}, {name!r}) names inode {ino}, which has no record")
        if parent not in records:
            bad(f"dentry ({parent}, {name!r}) is in a directory with no record")
        elif not stat.S_ISDIR(records[parent].mode):
            bad(f"dentry ({parent}, {name!r}) is in inode {parent}, not a directory")

    # reachability from the root, through dentries
    reached: set[int] = {ROOT_INODE}
    frontier: list[int] = [ROOT_INODE]
    while frontier:
        d = frontier.pop()
        for ino in children.get(d, []):
            if ino not in reached and ino in records:
                reached.add(ino)
                if stat.S_ISDIR(records[ino].mode):
                    frontier.append(ino)

    for ino, rec in sorted(records.items()):
        where = f"inode {ino} (mode {rec.mode:o})"
        names = names_of.get(ino, [])
        if ino == ROOT_INODE:
            if names:
                bad(f"the root has names {names}")
            if rec.parent != 0:
                bad(f"the root's parent is {rec.parent}")
        elif rec.nlink == 0:
            report.orphans.add(ino)
            if names:
                bad(f"{where}: nlink 0 but named {names}")
            if opens.get(ino, 0) <= 0:
                bad(f"{where}: orphan (nlink 0) that nobody holds open")
            if ino not in owned[b"P"]:
                bad(f"{where}: nlink 0 without its orphan marker")
            if rec.parent != 0:
                bad(f"{where}: orphan with parent {rec.parent}")
        else:
            if ino not in reached:
                bad(f"{where}: not reachable from the root (names {names})")
            if (rec.parent, rec.name) not in names:
                bad(f"{where}: primary name ({rec.parent}, {rec.name!r}) is no dentry {names}")
            if stat.S_ISDIR(rec.mode):
                if len(names) != 1:
                    bad(f"{where}: a directory with {len(names)} names {names}")
                subdirs = sum(
                    1
                    for c in children.get(ino, [])
                    if c in records and stat.S_ISDIR(records[c].mode)
                )
                if rec.nlink != 2 + subdirs:
                    bad(f"{where}: nlink {rec.nlink}, 2 + subdirectories {2 + subdirs}")
            else:
                if rec.nlink != len(names):
                    bad(f"{where}: nlink {rec.nlink}, names {len(names)}")
                secondary = {(p, n) for i, p, n in links if i == ino}
                expected = {name for name in names if name != (rec.parent, rec.name)}
                if secondary != expected:
                    bad(f"{where}: secondary links {secondary}, other names {expected}")
            if ino in owned[b"P"]:
                bad(f"{where}: has an orphan marker but nlink {rec.nlink}")
        if stat.S_ISLNK(rec.mode) and ino not in owned[b"S"]:
            bad(f"{where}: a symlink without a target")
    for i, p, n in sorted(links):
        if i not in records:
            bad(f"secondary link ({p}, {n!r}) of inode {i}, which has no record")
    for kind, inos in sorted(owned.items()):
        for ino in sorted(inos - records.keys()):
            bad(f"{kind.decode()} key of inode {ino}, which has no record")
    for ino in sorted(owned[b"S"] & records.keys()):
        if not stat.S_ISLNK(records[ino].mode):
            bad(f"inode {ino}: a symlink target on a non-symlink")
    for ino in sorted(owned[b"V"] & records.keys()):
        if not stat.S_ISDIR(records[ino].mode):
            bad(f"inode {ino}: a directory's change token on a non-directory")

    if held:  # a shared tree counts opens per session too: the sums must agree
        for ino in sorted(held.keys() | opens.keys()):
            if held[ino] != opens.get(ino, 0):
                bad(f"inode {ino}: open count {opens.get(ino, 0)}, sessions hold {held[ino]}")
    count = counters.get(codec.INODE_COUNT_KEY, 0) + shards
    if count != len(records):
        bad(f"the inode counter says {count}, there are {len(records)} records")
    next_inode = counters.get(codec.NEXT_INODE_KEY, 0)
    if records and next_inode <= max(records):
        bad(f"the next inode number {next_inode} is not above the highest, {max(records)}")
    if report.entries or report.inodes:  # the API walk ran: both views must agree
        for e in sorted(report.entries - report.kv_entries):
            bad(f"the API shows {e} (parent, name, inode); the keys do not")
        for e in sorted(report.kv_entries - report.entries):
            bad(f"the keys hold {e} (parent, name, inode); the API does not show it")
