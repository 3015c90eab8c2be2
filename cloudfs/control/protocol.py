"""The control channel between CLI commands and a running mount.

``cloudfs warmup``, ``stats``, ``flush`` and ``refresh`` talk to the mount
process over a UNIX socket next to its pid file (``paths.control_socket``),
created with mode 0600: only the user who mounted may use it. The framing is
``cloudfs.lib.jsonlines``: one JSON request line, JSON-line events, then one
final ``done`` or ``error`` line; a streaming request (an epoch's file order)
is followed by more lines from the client, ended by an empty line.

``cloudfs.hints`` talks to a second socket, ``paths.hints_socket``, open to
every user: the server tells its handlers who called (``PEER``).
"""

from __future__ import annotations

import errno

from cloudfs.errors import FsError
from cloudfs.lib.jsonlines import Message
from cloudfs.types import InodeId

# The key under which the server hands a handler the caller's {"pid", "uid", "gid"}.
PEER = "peer"


def inodes_of(request: Message) -> list[InodeId]:
    """The request's ``inodes``: files and directories are named by inode number."""
    raw = request.get("inodes")
    if not isinstance(raw, list) or not all(isinstance(i, int) and i > 0 for i in raw):
        raise FsError("'inodes' must be a list of inode numbers", errno=errno.EINVAL)
    return [InodeId(i) for i in raw]
