"""The control channel between CLI commands and a running mount.

``cloudfs warmup``, ``stats``, ``flush`` and ``refresh`` talk to the mount
process over a UNIX socket next to its pid file (``paths.control_socket``),
created with mode 0600: only the user who mounted may use it.

One request per connection: the client sends one JSON object on one line
(``{"op": "warmup", ...}``); the server answers with JSON lines, zero or more
progress events, then exactly one final line carrying ``"done": true`` (and the
result) or ``"error": message`` with ``"errno"``. Lines are UTF-8 and at most
``MAX_LINE`` bytes. A streaming request (an epoch's file order) is followed by
more lines from the client, ended by an empty line.

``cloudfs.hints`` talks to a second socket, ``paths.hints_socket``, open to
every user: the server tells its handlers who called (``PEER``).
"""

from __future__ import annotations

import errno
import json
from typing import Any

from cloudfs.errors import FsError
from cloudfs.types import InodeId

MAX_LINE = 16 * 1024 * 1024
Message = dict[str, Any]
# The key under which the server hands a handler the caller's {"pid", "uid", "gid"}.
PEER = "peer"


def encode(message: Message) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> Message:
    """One message; ``ValueError`` for anything but a JSON object (nesting too deep
    for the parser included: json's ``RecursionError`` would end the server)."""
    try:
        value = json.loads(line)
    except RecursionError:
        raise ValueError("a control message nested too deeply") from None
    if not isinstance(value, dict):
        raise ValueError("a control message is a JSON object")
    return value


def inodes_of(request: Message) -> list[InodeId]:
    """The request's ``inodes``: files and directories are named by inode number."""
    raw = request.get("inodes")
    if not isinstance(raw, list) or not all(isinstance(i, int) and i > 0 for i in raw):
        raise FsError("'inodes' must be a list of inode numbers", errno=errno.EINVAL)
    return [InodeId(i) for i in raw]
