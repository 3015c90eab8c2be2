"""The caller's end of the block wire (``wire.py``): one GET, and its reply read whole.

Both callers of a block server use it: a mount asking cache-group members
(``transport.py``, HTTP over TCP) and a process reading through its node's
mount (``cloudfs.client.local_mount``, HTTP over a UNIX socket). Each keeps its
own connections; ``get`` sends the GET on one and reads the reply:

* A reply that says it is larger than any block (``MAX_BLOCK_BYTES``), or does
  not say how large it is, is refused at its header, unread (never an unbounded
  body into memory): an ``HTTPException``, the connection closed.
* ``X-Cloudfs-Crc32`` and ``X-Cloudfs-Errno`` are taken only when they are
  ASCII digits (``str.isdigit`` alone would take '²', which ``int`` refuses);
  anything else is as if absent.
* A connection that served a call before and is found closed before any byte
  of a reply (the server closes idle keep-alive connections, or restarted) is
  dropped and the call sent again on a new one, once: the GET changes nothing,
  and a connection closed while idle is no sign that the server is down. Any
  other failure drops the connection and is the caller's.
"""

from __future__ import annotations

import http.client
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from cloudfs.peers import wire

__all__ = ["Reply", "get"]

Conn = TypeVar("Conn", bound=http.client.HTTPConnection)


@dataclass(frozen=True, slots=True)
class Reply:
    """What a block server answered: a status, and for a 200 the block and its headers."""

    status: int
    data: bytes
    source: str | None  # X-Cloudfs-Source: memory, disk or origin
    crc32: int | None  # X-Cloudfs-Crc32
    errno: int | None  # X-Cloudfs-Errno: the server answered about this block
    reason: str


class _Stale(Exception):
    """A reused connection was found closed before any reply: send again on a new one."""


def get(
    connect: Callable[[], tuple[Conn, bool]],
    drop: Callable[[Conn], None],
    target: str,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """``GET target`` on ``connect()``'s connection (the caller's, for this thread, and
    whether it served a call before), once more on a new one where a reused
    connection turned out closed; ``drop`` is given every connection that failed.
    ``OSError``/``HTTPException`` for a server not reached or not answering
    (``TimeoutError`` past the connection's timeout)."""
    conn, reused = connect()
    try:
        return _exchange(conn, target, headers or {}, reused)
    except _Stale:
        drop(conn)
        conn, _ = connect()
        try:
            return _exchange(conn, target, headers or {}, reused=False)
        except BaseException:
            drop(conn)
            raise
    except BaseException:
        drop(conn)
        raise


def _exchange(
    conn: http.client.HTTPConnection, target: str, headers: Mapping[str, str], reused: bool
) -> Reply:
    """One request and its whole reply on ``conn`` (``HTTPConnection`` connects with
    TCP_NODELAY); ``_Stale`` where a reused connection turned out closed before any
    byte of a reply."""
    try:
        conn.request("GET", target, headers=headers)
        response = conn.getresponse()
    except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
        if reused:
            raise _Stale from exc
        raise
    if response.length is None or response.length > wire.MAX_BLOCK_BYTES:
        conn.close()  # not a block server's reply: never read an unbounded body
        raise http.client.HTTPException(f"a reply of {response.length} bytes refused")
    data = response.read()
    if response.will_close:
        conn.close()
    return Reply(
        status=response.status,
        data=data,
        source=response.getheader(wire.SOURCE_HEADER),
        crc32=_number(response.getheader(wire.CRC_HEADER)),
        errno=_number(response.getheader(wire.ERRNO_HEADER)),
        reason=data[:200].decode("utf-8", "replace").strip() if response.status != 200 else "",
    )


def _number(header: str | None) -> int | None:
    """A header's decimal number; None for none, or for anything but ASCII digits."""
    return int(header) if header is not None and header.isascii() and header.isdigit() else None
