"""LocalMount: blocks of a volume through a running mount of it on this node.

A ``grpc://`` mount serves its blocks to its user's other processes on a UNIX
socket (``cloudfs.mount.local_blocks``: ``CacheServer``, the block wire of
``cloudfs.peers.wire``). Reading through it, every process of the node shares
the mount's memory and disk tiers: a block any of them (or the mount itself)
read is not fetched again, and a forked DataLoader worker starts with a warm
cache instead of an empty one.

A mount is found by glob (``paths.local_blocks_sockets``: the volume's
block-key salt names it) and kept while it answers. Where there is none, or
it stops answering (unmounted, killed: its socket refuses), ``get`` says so
(None) and the caller reads the object store itself; the glob is tried again
at most every ``PROBE_SECONDS``, not per block.

What the mount answers:

* 200: the block, checked against its length and CRC-32 (a mismatch is not
  used: the caller fetches the block itself).
* ESTALE (412): the object is no longer that version: ``ObjectChanged``, as the
  store's If-Match would have said.
* EINVAL, EACCES, EPERM: the mount does not serve these blocks (another
  ``--block-size``, another store): logged once, and the mount left out until
  the next probe.
* Another errno (the mount's store failing, ENOENT): about this block only;
  the caller asks the store.
* A status without an errno, or no reply within the read timeout: not a block
  server to ask; left out until the next probe.

One GET and its reply are ``cloudfs.peers.reply``'s, as a mount's calls to its
cache group are. Each thread keeps one keep-alive connection (``http.client``
serves one request at a time), and connections belong to the process that
opened them: after a ``fork`` the child drops the parent's (closing its copies
of the descriptors, which leaves the parent's connections open) and opens its
own.
"""

from __future__ import annotations

import contextlib
import errno as E
import http.client
import logging
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from cloudfs.client.unix_http import UnixHTTPConnection
from cloudfs.control import paths
from cloudfs.data.blocks import ObjectRef, block_length
from cloudfs.errors import ObjectChanged
from cloudfs.metrics import Metrics
from cloudfs.peers import reply, wire
from cloudfs.peers.reply import Reply

log = logging.getLogger(__name__)

PROBE_SECONDS = 5.0  # how often a process without a usable mount looks for one
# Every socket read's timeout: a mount fetching a cold block ticks every 0.5 s (wire.py).
READ_TIMEOUT = 5.0
TIER = "mount"  # the label of blocks served by the mount in cloudfs_blockcache_*
REFUSING = (E.EINVAL, E.EACCES, E.EPERM)  # the mount serves no such blocks


class LocalMount:
    def __init__(
        self,
        salt: str,
        store_uri: str,
        block_size: int,
        metrics: Metrics,
        *,
        find: Callable[[], list[Path]] | None = None,
        probe_seconds: float = PROBE_SECONDS,
        timeout: float = READ_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``salt``: the volume's block-key salt (``TreeUri.cache_id``), which names
        its mounts' sockets; ``store_uri``: the volume's UFS, as blocks are asked
        for; ``find``: the candidate sockets, newest first (tests)."""
        self._find = find or (lambda: paths.local_blocks_sockets(salt))
        self._store_uri = store_uri
        self.block_size = block_size
        self._probe_seconds = probe_seconds
        self._timeout = timeout
        self._clock = clock
        self._hits = metrics.cache_hits.labels(TIER)
        self._hit_bytes = metrics.cache_hit_bytes.labels(TIER)
        self._misses = metrics.cache_misses.labels(TIER)
        self._miss_bytes = metrics.cache_miss_bytes.labels(TIER)
        self._told: set[str] = set()
        self._reset()

    def _reset(self) -> None:
        """This process's state, nothing of a parent's."""
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._open: set[UnixHTTPConnection] = set()
        self._path: str | None = None  # the socket of the mount in use
        self._next_probe = 0.0

    @property
    def path(self) -> str | None:
        """The socket of the mount being read through, if any (for logs and tests)."""
        return self._path

    def serving(self) -> bool:
        """Whether a mount serves this volume's blocks now (looked for if it is time)."""
        return self._mount() is not None

    def get(self, ref: ObjectRef, index: int) -> bytes | None:
        """Block ``index`` of ``ref`` from the mount, or None where the caller must read
        the store itself; ``ObjectChanged`` where the mount found another version."""
        path = self._mount()
        if path is None:
            return None
        query = wire.Query(self._store_uri, ref.key, ref.etag, ref.size, self.block_size, index)
        try:
            answer = self._call(path, query.target())
        except (OSError, http.client.HTTPException) as e:
            self._leave(path, f"no answer ({e or type(e).__name__})")
            return None
        return self._accept(path, ref, index, answer)

    def close(self) -> None:
        """Close this process's connections (a forked child has none of its parent's)."""
        if os.getpid() != self._pid:
            self._forked()
            return
        with self._lock:
            connections, self._open = list(self._open), set()
            self._path = None
        for conn in connections:
            conn.close()

    # -- the mount ------------------------------------------------------------

    def _mount(self) -> str | None:
        """The socket of a mount to ask: the one in use, or one found now if it is time
        to look again; None for none."""
        if os.getpid() != self._pid:
            self._forked()
        with self._lock:
            if self._path is not None:
                return self._path
            now = self._clock()
            if now < self._next_probe:
                return None
            self._next_probe = now + self._probe_seconds
        for candidate in self._find():
            if _accepts(str(candidate), self._timeout):
                with self._lock:
                    self._path = str(candidate)
                self._tell(f"found:{candidate}", "reading through the mount at %s", candidate)
                return str(candidate)
        return None

    def _leave(self, path: str, why: str) -> None:
        """Stop asking the mount at ``path`` until the next probe."""
        log.debug("local mount %s left out: %s", path, why)
        with self._lock:
            if self._path == path:
                self._path = None
                self._next_probe = self._clock() + self._probe_seconds
        held = getattr(self._local, "held", None)
        if held is not None:
            self._drop(held[1])

    def _forked(self) -> None:
        """In a forked child: the parent's descriptors closed (its connections stay
        open: the parent holds them too), and everything opened afresh."""
        inherited = list(self._open)
        self._reset()
        for conn in inherited:
            with contextlib.suppress(OSError):
                conn.close()

    def _tell(self, what: str, message: str, *args: object) -> None:
        """Log ``message`` once per process and ``what``."""
        if what not in self._told:
            self._told.add(what)
            log.info(message, *args)

    # -- one call ---------------------------------------------------------------

    def _accept(self, path: str, ref: ObjectRef, index: int, answer: Reply) -> bytes | None:
        if answer.status == 200:
            length = block_length(index, ref.size, self.block_size)
            data = answer.data
            if len(data) != length or answer.crc32 != zlib.crc32(data):
                log.warning(
                    "local mount %s: block %d of %r came back damaged (%d bytes, crc %s); "
                    "reading it from the store", path, index, ref.key, len(data), answer.crc32,
                )  # fmt: skip
                return None
            hit = answer.source in ("memory", "disk")
            (self._hits if hit else self._misses).inc()
            (self._hit_bytes if hit else self._miss_bytes).inc(length)
            return data
        if answer.errno == E.ESTALE:
            raise ObjectChanged(f"{ref.key!r}: {answer.reason}")
        if answer.errno is None:
            self._leave(path, f"answered {answer.status} {answer.reason}")
        elif answer.errno in REFUSING:
            self._tell(
                f"refused:{path}:{answer.errno}",
                "the mount at %s does not serve these blocks (%s); reading the store "
                "(is its --block-size %d, as this client's block_size?)",
                path, answer.reason, self.block_size,
            )  # fmt: skip
            self._leave(path, answer.reason)
        return None

    def _call(self, path: str, target: str) -> Reply:
        return reply.get(lambda: self._connection(path), self._drop, target)

    def _connection(self, path: str) -> tuple[UnixHTTPConnection, bool]:
        """This thread's connection to the mount at ``path``, and whether it served a
        call before."""
        held: tuple[str, UnixHTTPConnection] | None = getattr(self._local, "held", None)
        if held is not None:
            if held[0] == path:
                return held[1], True
            self._drop(held[1])  # another mount's: the one in use changed
        conn = UnixHTTPConnection(path, self._timeout)
        self._local.held = (path, conn)
        with self._lock:
            self._open.add(conn)
        return conn, False

    def _drop(self, conn: UnixHTTPConnection) -> None:
        held = getattr(self._local, "held", None)
        if held is not None and held[1] is conn:
            self._local.held = None
        with self._lock:
            self._open.discard(conn)
        conn.close()


def _accepts(path: str, timeout: float) -> bool:
    """Whether a process listens on the socket ``path`` (a stale one refuses)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
    except OSError:
        return False
    finally:
        sock.close()
    return True
