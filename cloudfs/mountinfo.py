"""The one reader of ``/proc/self/mountinfo`` (see proc(5)).

Each line is one mount::

    36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue
    (1)(2) (3)  (4)     (5)         (6)        (7)   (8) (9)    (10)         (11)

mount id, parent id, major:minor, root, mount point, mount options, zero or
more optional fields (``shared:N``, ``master:N``, ...), the ``-`` separator,
filesystem type, source and super options. The kernel writes a space, tab,
newline and backslash inside a field as the octal escapes ``\\040``, ``\\011``,
``\\012`` and ``\\134`` (super options may also escape ``,`` and ``=``); every
``\\ooo`` is undone here, on bytes, and the result decoded as the OS decodes
file names, so a mount point compares equal to ``os.path.realpath`` of it.

A path mounted over more than once appears once per mount, in mount order:
the last one is the topmost, the one a lookup of the path reaches.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

PROC_MOUNTINFO = "/proc/self/mountinfo"

_ESCAPE = re.compile(rb"\\([0-3][0-7]{2})")  # one byte, \000 to \377


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of mountinfo, fields unescaped."""

    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str  # the directory of the filesystem mounted here ("/" for a whole one)
    mount_point: str
    options: tuple[str, ...]  # per-mount options: "rw", "nosuid", "relatime", ...
    optional_fields: tuple[str, ...]  # "shared:1", "master:2", ... (often none)
    fs_type: str  # "ext4", "fuse.cloudfs", ...
    source: str  # "/dev/sda1", "s3://bucket/prefix", "none", ...
    super_options: tuple[str, ...]  # per-filesystem options

    @property
    def device(self) -> str:
        """``"major:minor"``, as ``/sys/class/bdi/`` names a FUSE mount's device."""
        return f"{self.major}:{self.minor}"

    @property
    def read_only(self) -> bool:
        return "ro" in self.options


def unescape(field: bytes) -> str:
    """A mountinfo field with its ``\\ooo`` escapes undone, decoded like a file name."""
    return os.fsdecode(_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]), field))


def parse_line(line: bytes) -> Mount:
    """One mountinfo line (with or without its newline); ``ValueError`` if malformed."""
    fields = line.rstrip(b"\n").split(b" ")
    try:
        sep = fields.index(b"-", 6)  # no field before it can be "-": paths start with "/"
    except ValueError:
        raise ValueError(f"mountinfo line without its ' - ' separator: {line!r}") from None
    if len(fields) != sep + 4:
        raise ValueError(f"mountinfo line without 3 fields after ' - ': {line!r}")
    major, _, minor = fields[2].partition(b":")
    return Mount(
        mount_id=int(fields[0]),
        parent_id=int(fields[1]),
        major=int(major),
        minor=int(minor),
        root=unescape(fields[3]),
        mount_point=unescape(fields[4]),
        options=_options(fields[5]),
        optional_fields=tuple(unescape(f) for f in fields[6:sep]),
        fs_type=unescape(fields[sep + 1]),
        source=unescape(fields[sep + 2]),
        super_options=_options(fields[sep + 3]),
    )


def parse(lines: Iterable[bytes]) -> list[Mount]:
    """Every mount of ``lines``, in order (empty lines skipped)."""
    return [parse_line(line) for line in lines if line.strip()]


def read(path: str = PROC_MOUNTINFO) -> list[Mount]:
    """The mounts of this process's mount namespace (or of ``path``), in mount order."""
    with open(path, "rb") as f:
        return parse(f)


def topmost(mounts: Iterable[Mount], mount_point: str) -> Mount | None:
    """The last mount at ``mount_point`` (an unescaped, resolved path), if any."""
    found = None
    for mount in mounts:
        if mount.mount_point == mount_point:
            found = mount
    return found


def _options(field: bytes) -> tuple[str, ...]:
    return tuple(unescape(option) for option in field.split(b",") if option)
