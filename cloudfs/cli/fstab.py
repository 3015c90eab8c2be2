"""``mount.fuse.cloudfs``: the helper mount(8) runs for fstab entries of type ``fuse.cloudfs``.

fstab line::

    s3://bucket/prefix  /mnt/data  fuse.cloudfs  _netdev,allow_other,cache_size=50G  0 0

mount(8) calls ``mount.fuse.cloudfs SOURCE MOUNTPOINT -o OPTIONS``; this turns
that into ``cloudfs mount SOURCE MOUNTPOINT -o OPTIONS``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from cloudfs.cli.main import main as cloudfs_main


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: mount.fuse.cloudfs UFS_URI MOUNTPOINT [-o OPTIONS]", file=sys.stderr)
        return 2
    source, mountpoint, rest = args[0], args[1], args[2:]
    forwarded: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "-o" and i + 1 < len(rest):
            forwarded += ["-o", rest[i + 1]]
            i += 2
            continue
        if arg.startswith("-o") and len(arg) > 2:
            forwarded += ["-o", arg[2:]]
        elif arg in ("-f",):
            forwarded.append("--foreground")
        # -n (no mtab), -s (sloppy), -v (verbose) from mount(8): nothing to do
        i += 1
    return cloudfs_main(["mount", source, mountpoint, *forwarded])


if __name__ == "__main__":
    sys.exit(main())
