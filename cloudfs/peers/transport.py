"""BlockTransport: a mount's HTTP calls to cache-group members, run at once in a pool.

``PeerGroup`` sends each block of a batch with ``submit`` and waits for the
futures, so one batch costs one deadline however many members hang. Each
pool thread keeps one persistent ``http.client.HTTPConnection`` per member
(thread-local: an ``HTTPConnection`` serves one request at a time), so a
block costs no TCP handshake once the pool is warm.

Each call and its reply are ``reply.get``'s (the caller's end of the block
wire). A connection that fails or times out is dropped (the member then backs
off, ``health.py``). One that had served a call before and finds the worker
has closed it since (idle keep-alive: the worker closes after 60 s, or it
restarted) is re-opened and the call sent again, once. A second failure is
the member's. A reply that says it is larger than any block
(``MAX_BLOCK_BYTES``) is refused at its header, unread: the member is then
left out as a broken one.

Members removed by ``forget`` have their connections closed lazily: each
thread closes its own, the next time it runs a call, so no connection is
closed under a thread that is using it. ``close`` shuts the pool and every
connection down (a call still blocked on one wakes and fails).

With ``tls`` the connections are HTTPS (``cloudfs/tls.py``: the members' CA, the
mount's client certificate for mTLS), one ``SSLContext`` for all; a handshake that
fails is an ``ssl.SSLError`` (an ``OSError``), the member's failure like any other.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from cloudfs.peers import reply
from cloudfs.peers.reply import Reply
from cloudfs.tls import ClientTLS

POOL_THREADS = 32  # calls to members at once, per mount


class BlockTransport:
    def __init__(self, *, threads: int = POOL_THREADS, tls: ClientTLS | None = None) -> None:
        self._ssl: ssl.SSLContext | None = tls.ssl_context() if tls is not None else None
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="cache-peer")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._generation: dict[str, int] = {}  # member -> bumped when it is forgotten
        self._open: set[http.client.HTTPConnection] = set()
        self._closed = False

    def submit(
        self, member: str, target: str, headers: dict[str, str], timeout: float
    ) -> Future[Reply]:
        """Send ``GET target`` to ``member`` in a pool thread (``RuntimeError`` once
        closed); its future raises ``OSError``/``HTTPException`` for a member not
        reached or not answering within ``timeout`` seconds."""
        return self._pool.submit(self._call, member, target, headers, timeout)

    def forget(self, member: str) -> None:
        """``member`` left the group: its connections close on their threads' next call."""
        with self._lock:
            self._generation[member] = self._generation.get(member, 0) + 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections, self._open = list(self._open), set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for conn in connections:
            _shut(conn)

    def _call(self, member: str, target: str, headers: dict[str, str], timeout: float) -> Reply:
        return reply.get(
            lambda: self._connection(member, timeout),
            lambda conn: self._drop(member, conn),
            target,
            headers,
        )

    def _connection(self, member: str, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection to ``member`` and whether it served a call before."""
        mine: dict[str, tuple[int, http.client.HTTPConnection]] = self._mine()
        with self._lock:
            if self._closed:
                raise ConnectionAbortedError("the peer group is closed")
            generations = dict(self._generation)
        for name, (generation, conn) in list(mine.items()):
            if generations.get(name, 0) != generation:  # forgotten since: close it here
                self._drop(name, conn)
        held = mine.get(member)
        if held is not None:
            held[1].timeout = timeout
            if held[1].sock is not None:
                held[1].sock.settimeout(timeout)
            return held[1], True
        host, _, port = member.rpartition(":")
        conn = (
            http.client.HTTPSConnection(
                host.strip("[]"), int(port), timeout=timeout, context=self._ssl
            )
            if self._ssl is not None
            else http.client.HTTPConnection(host.strip("[]"), int(port), timeout=timeout)
        )
        mine[member] = (generations.get(member, 0), conn)
        with self._lock:
            self._open.add(conn)
        return conn, False

    def _mine(self) -> dict[str, tuple[int, http.client.HTTPConnection]]:
        mine: dict[str, tuple[int, http.client.HTTPConnection]] | None = getattr(
            self._local, "connections", None
        )
        if mine is None:
            mine = self._local.connections = {}
        return mine

    def _drop(self, member: str, conn: http.client.HTTPConnection) -> None:
        mine = self._mine()
        if member in mine and mine[member][1] is conn:
            del mine[member]
        with self._lock:
            self._open.discard(conn)
        conn.close()


def _shut(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    conn.close()
