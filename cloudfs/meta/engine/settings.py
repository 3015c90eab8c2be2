"""Per-volume settings the tree operations need, fixed when the tree is opened."""

from __future__ import annotations

import stat
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TreeSettings:
    """Owner and modes given to what the UFS listing reveals, and the listing TTL."""

    ttl_ns: float  # a listed directory is listed again after this long
    default_uid: int = 0
    default_gid: int = 0
    file_mode: int = 0o644  # permission bits of files found in the UFS
    dir_mode: int = 0o755  # permission bits of directories found in the UFS
    # A new file leaves its directory's mtime/ctime alone if they are younger than
    # ``tree.LAZY_DIR_TIMES_NS`` (JuiceFS's --skip-dir-mtime): over an optimistic
    # engine (etcd) creates in one directory then rarely conflict on its record.
    lazy_dir_times: bool = False

    @property
    def file_type_mode(self) -> int:
        return stat.S_IFREG | (self.file_mode & 0o7777)

    @property
    def dir_type_mode(self) -> int:
        return stat.S_IFDIR | (self.dir_mode & 0o7777)

    def is_stale(self, loaded_at_ns: int, now_ns: int) -> bool:
        """Whether a directory listed at ``loaded_at_ns`` (0: never) must be listed again."""
        return loaded_at_ns == 0 or now_ns - loaded_at_ns > self.ttl_ns
