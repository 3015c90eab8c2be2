"""A stand-in for the ``cloudfs`` CLI that records how the node plugin runs it.

    python fake_cloudfs.py RECORD mount URI MOUNTPOINT ...

Appends one JSON line to RECORD per run: the arguments, the contents of the
token files they name (to check which secret reached which file) and whether
the cache token came through the environment; exits 0 without mounting. The
driver runs it through ``--cloudfs-command``, so the command line checked is
exactly the one a real node runs.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    record, args = argv[0], argv[1:]
    entry: dict[str, object] = {
        "args": args,
        "cache_token_in_env": "CLOUDFS_CACHE_TOKEN" in os.environ,
    }
    for flag in ("--token-file", "--cache-token-file"):
        if flag in args:
            with open(args[args.index(flag) + 1]) as f:
                entry[flag] = f.read()
    with open(record, "a") as f:
        f.write(json.dumps(entry) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
