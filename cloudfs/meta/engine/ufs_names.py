"""Refusing, before anything is made, a name whose UFS key the store cannot hold.

Every name the tree adds gets a key (its path), whether or not an object
exists under it yet: a new file is uploaded there at close, a hard link's name
becomes the object's key when the first name goes, and a symlink or fifo sits
in a directory that may be renamed. So one rule covers all of them: the tree
never holds a name whose key ``ObjectStore.validate_key`` refuses. A refusal
is logged once (INFO: the operation, the key, the store's reason) and raised
with the store's errno (ENAMETOOLONG, EINVAL, EILSEQ).

Renaming a directory changes the key of everything below it. Only the
longest keys can break a length limit, and only if the directory's key grows;
then ``check_subtree`` walks the subtree the tree knows to find the longest
file and directory path below it. The walk reads each directory's entries
once and loads an entry's record only while its directory (``nlink - 2``)
still has subdirectories to find, so a directory of files costs one scan. It
is bounded by the entries the tree holds below the directory, the same order
of work as the store's own ``rename_dir`` (S3 copies every object), and the
S3 store checks again, before its first copy, every key it lists: that covers
parts of the subtree the tree has not listed yet.
"""

from __future__ import annotations

import logging

from cloudfs.errors import FsError
from cloudfs.meta.engine import tree
from cloudfs.meta.engine.kv import KVTxn
from cloudfs.meta.engine.names import name_to_str
from cloudfs.ufs.interface import ObjectStore

log = logging.getLogger(__name__)


def _shown(key: str) -> str:
    """The key for a log line: printable, its middle elided past 300 characters."""
    text = key.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= 300 else f"{text[:150]}...{text[-150:]}"


def check_key(store: ObjectStore, op: str, key: str, *, directory: bool = False) -> None:
    """Raise (and log) the store's error if it cannot hold ``key``."""
    try:
        store.validate_key(key, directory=directory)
    except FsError as err:
        log.info("%s '%s' refused (%d bytes): %s", op, _shown(key), _bytes(key), err)
        raise


def _bytes(key: str) -> int:
    return len(key.encode("utf-8", "surrogateescape"))


def longest_below(txn: KVTxn, ino: int) -> tuple[str | None, str | None]:
    """The longest relative paths ("/a/b") below directory ``ino``: (file, directory).

    "Longest" in UTF-8 bytes; anything not a directory counts as a file.
    """
    longest: dict[bool, str | None] = {False: None, True: None}
    stack: list[tuple[int, str]] = [(ino, "")]
    while stack:
        current, rel = stack.pop()
        subdirs_left = tree.load(txn, current).nlink - 2
        for name, child in tree.children(txn, current):
            path = f"{rel}/{name_to_str(name)}"
            is_dir = subdirs_left > 0 and tree.is_dir(tree.load(txn, child))
            if is_dir:
                subdirs_left -= 1
                stack.append((child, path))
            best = longest[is_dir]
            if best is None or _bytes(path) > _bytes(best):
                longest[is_dir] = path
    return longest[False], longest[True]


def check_subtree(
    txn: KVTxn, store: ObjectStore, op: str, ino: int, old_key: str, new_key: str
) -> None:
    """Raise (and log) if a key below directory ``ino`` would not fit once it moves
    from ``old_key`` to ``new_key``. Nothing to check when the key does not grow."""
    if _bytes(new_key) <= _bytes(old_key):
        return
    file, directory = longest_below(txn, ino)
    for rel, is_dir in ((file, False), (directory, True)):
        if rel is not None:
            check_key(store, op, new_key + rel, directory=is_dir)
