"""``UnixHTTPConnection``: ``http.client``'s connection over a UNIX socket.

A mount serves its blocks to the node's processes with the HTTP/1.1 block wire
of ``cloudfs.peers.wire`` on a socket file (``cloudfs.mount.local_blocks``); only
the connecting differs from TCP, so only ``connect`` is overridden and
everything else (keep-alive, interim 100 Continue skipped, ``Content-Length``)
is the standard library's.
"""

from __future__ import annotations

import http.client
import socket


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        """``timeout``: of the connect and of every socket read after it."""
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
