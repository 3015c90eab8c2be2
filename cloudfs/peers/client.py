"""PeerGroup: a mount's side of a cache group (the ``PeerTier`` of cloudfs/cache/interface.py).

For each block the loader misses, ask the member that owns it (``Ring``,
skipping members ``MemberHealth`` leaves out) with one HTTP GET (``wire.py``);
the calls of one batch run at once (``BlockTransport``: a pool of threads,
each with a keep-alive connection per member, so one worker-thread hop of the
mount covers the batch). A member silent for ``deadline`` (every socket read
has that timeout; a worker still fetching sends interim ticks) fails the
call; none is waited for longer than ``wire.CALL_CAP_SECONDS`` from when it
was sent. Whatever fails comes back as ``None`` and the
loader fetches that block from the UFS itself: a peer can make a read faster,
never make it fail.

* A member that was not reached, did not answer in time, refused the token
  (401) or answered what a worker does not (no ``X-Cloudfs-Errno``) is left
  out for a back-off (``health.py``); a dead worker costs one failed call
  (immediate when its port refuses, ``deadline`` when it hangs), then its
  blocks go to their next owner in the ring.
* A worker's answer about one block (404, 412 for a changed object, 503 from
  its object store: with ``X-Cloudfs-Errno``) leaves the member in use; only
  that block is fetched locally.
* A reply of the wrong length or whose CRC-32 does not match its bytes is
  refused (and counted as an error): a confused peer or a flipped bit on the
  way cannot hand the mount a torn block.
* ``fill`` (warm-up through the group) asks each owner to hold its blocks,
  fetching them once if it must, and sends no bytes back.

Membership can change while reads run (``update``: a ``--cache-group``
listed by the tree service): gone members' connections are closed (lazily,
by the thread holding each), and each block's owner is taken from the ring
current when its call is sent. An empty group is no error: every block goes
to the UFS. A mount that serves its own cache to the group (``self_address``)
never asks itself: for a block it owns, the UFS is asked directly and its
own loader caches the block, which is what a peer asking it would get.

Metrics per member: ``cloudfs_peer_requests_total{member,result}`` (hit,
miss, error), ``cloudfs_peer_bytes_total``, ``cloudfs_peer_request_seconds``,
``cloudfs_peer_backoffs_total``.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import logging
import ssl
import threading
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cloudfs.cache.interface import BlockAsk
from cloudfs.metrics import Metrics
from cloudfs.peers import wire
from cloudfs.peers.health import MemberHealth
from cloudfs.peers.reply import Reply
from cloudfs.peers.ring import Ring
from cloudfs.peers.transport import BlockTransport
from cloudfs.tls import ClientTLS
from cloudfs.tokens import Token, token_source
from cloudfs.ufs.factory import parse_uri

log = logging.getLogger(__name__)

# How long a member may stay silent before the mount gives up on it (the issue's
# bound): the timeout of every socket read. A worker that holds the block answers
# in milliseconds; one fetching it from a slow origin keeps sending interim ticks
# (wire.TICK_SECONDS) and is waited for up to wire.CALL_CAP_SECONDS, so a slow
# origin does not make every cold block look like a dead member, which would
# have the mount fetch the block itself, a second time for the group.
DEADLINE_SECONDS = 2.0
_HITS = ("memory", "disk")


@dataclass(frozen=True, slots=True)
class _Sent:
    member: str
    future: concurrent.futures.Future[Reply]
    started: float
    deadline: float


Pending = _Sent | None


class PeerGroup:
    def __init__(
        self,
        members: Sequence[str],
        store_uri: str,
        metrics: Metrics,
        *,
        token: Token | None = None,
        deadline: float = DEADLINE_SECONDS,
        health: MemberHealth | None = None,
        self_address: str | None = None,
        tls: ClientTLS | None = None,
    ) -> None:
        """``store_uri``: the mount's UFS (what workers open); ``members``: HOST:PORT each
        (may be empty; see ``update``); ``self_address``: this mount's own HOST:PORT
        when it is a member too (never asked); ``tls``: the members serve TLS."""
        self._store_uri = parse_uri(store_uri).normalized
        self._metrics = metrics
        self._deadline = deadline
        self._health = health or MemberHealth(probe_window=deadline + 1.0)
        self._token = token_source(token)
        self._self = self_address
        self._lock = threading.Lock()  # one update at a time
        self._transport = BlockTransport(tls=tls)
        self._ring: Ring | None = None  # swapped whole: a sender sees one group or the other
        metrics.peer_members_view = self._members_up
        self.update(members)

    @property
    def members(self) -> tuple[str, ...]:
        ring = self._ring
        return ring.members if ring is not None else ()

    def update(self, members: Iterable[str]) -> bool:
        """Make ``members`` the group (thread-safe); returns whether it changed.

        New members get a clean health record (a worker that restarted is asked
        at once); gone members' connections are closed by the threads holding
        them, and a call still in flight to one finishes or fails on its own.
        """
        names = tuple(sorted({m.strip() for m in members if m.strip()}))
        with self._lock:
            before = self.members
            if names == before:
                return False
            for m in names:
                if m not in before:
                    self._health.succeeded(m)
            for m in before:
                if m not in names:
                    self._transport.forget(m)
            self._ring = Ring(names) if names else None
            self._metrics.peer_group_size.set(len(names))  # who: cloudfs_peer_member_up
        return True

    def fetch(self, asks: Sequence[BlockAsk]) -> list[bytes | None]:
        """Each block from its owner, or ``None`` (fetch it yourself); blocking, bounded."""
        pending = [self._send(ask) for ask in asks]
        return [self._receive(ask, sent) for ask, sent in zip(asks, pending, strict=True)]

    def fill(self, asks: Sequence[BlockAsk]) -> list[str | None]:
        """Have each block's owner hold it (warm-up through the group, no bytes sent
        back): "memory" or "disk" where it was held, "origin" where the owner fetched
        it now, ``None`` where no owner took it (warm that block yourself)."""
        pending = [self._send(ask, fill_only=True) for ask in asks]
        return [self._filled(ask, sent) for ask, sent in zip(asks, pending, strict=True)]

    def view(self) -> list[dict[str, object]]:
        """Each member and whether it is in use now or left out for a back-off."""
        return [{"member": m, "up": up} for m, up in self._members_up()]

    def _members_up(self) -> list[tuple[str, bool]]:
        """(member, in use) for each member: ``cloudfs_peer_member_up`` at scrape time."""
        failing = set(self._health.failing())
        return [(m, m not in failing) for m in self.members]

    def close(self) -> None:
        """Close every connection; ``members`` and ``view`` still say what the group was."""
        self._transport.close()

    def _send(self, ask: BlockAsk, *, fill_only: bool = False) -> Pending:
        ring = self._ring  # the group as it is now, for this block
        if ring is None:
            return None  # nobody in the group: the UFS it is
        member = next((m for m in ring.ranked(ask.cache_key) if self._health.usable(m)), None)
        if member is None or member == self._self:
            return None  # every member is left out, or the block is ours: the UFS it is
        query = wire.Query(
            store_uri=self._store_uri,
            key=ask.object_key,
            etag=ask.etag,
            object_size=ask.object_size,
            block_size=ask.block_size,
            index=ask.index,
            fill=fill_only,
        )
        try:
            future = self._transport.submit(member, query.target(), self._auth(), self._deadline)
        except Exception as exc:  # a closed group: never the reader's problem
            log.warning("cache peer %s: cannot send: %r", member, exc)
            self._metrics.peer_requests.labels(member, "error").inc()
            return None
        return _Sent(member, future, time.monotonic(), wire.CALL_CAP_SECONDS)

    def _receive(self, ask: BlockAsk, sent: Pending) -> bytes | None:
        got = self._reply(ask, sent)
        if got is None:
            return None
        member, reply = got
        data = reply.data
        if len(data) != ask.length or reply.crc32 is None or zlib.crc32(data) != reply.crc32:
            log.warning(
                "cache peer %s sent %d bytes for block %d of %r (%d wanted) with a CRC-32 of "
                "%08x (%s sent): ignored",
                member, len(data), ask.index, ask.object_key, ask.length,
                zlib.crc32(data), reply.crc32,
            )  # fmt: skip
            self._metrics.peer_requests.labels(member, "error").inc()
            return None
        self._metrics.peer_requests.labels(member, "hit" if reply.source in _HITS else "miss").inc()
        self._metrics.peer_bytes.labels(member).inc(len(data))
        return data

    def _filled(self, ask: BlockAsk, sent: Pending) -> str | None:
        got = self._reply(ask, sent)
        if got is None:
            return None
        member, reply = got
        self._metrics.peer_requests.labels(member, "hit" if reply.source in _HITS else "miss").inc()
        return reply.source if reply.source in _HITS else "origin"

    def _reply(self, ask: BlockAsk, sent: Pending) -> tuple[str, Reply] | None:
        """The member's 200 to ``sent``, or None (counted, and the member's health kept)."""
        if sent is None:
            return None
        member = sent.member
        left = sent.started + sent.deadline - time.monotonic()
        try:
            reply = sent.future.result(timeout=max(0.0, left))
        except (concurrent.futures.TimeoutError, OSError, http.client.HTTPException) as exc:
            sent.future.cancel()  # if it has not started yet: it never will
            why = f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc)
            self._failed(member, ask, f"TLS: {why}" if isinstance(exc, ssl.SSLError) else why)
            return None
        except Exception as exc:  # a cancelled future, a bug: fetch it ourselves
            log.warning("cache peer %s: %r", member, exc)
            self._metrics.peer_requests.labels(member, "error").inc()
            return None
        if reply.status != 200:
            if reply.errno is not None:  # the worker answered, about this block only
                self._metrics.peer_requests.labels(member, "error").inc()
                log.debug("cache peer %s: block %d of %r: %d %s", member, ask.index,
                          ask.object_key, reply.status, reply.reason)  # fmt: skip
                return None
            if reply.status == 401 and self._token is not None:
                self._token.refresh()  # a rotated token file: the next call sends the new one
            self._failed(member, ask, f"HTTP {reply.status}: {reply.reason}")
            return None
        self._metrics.peer_latency.labels(member).observe(time.monotonic() - sent.started)
        self._health.succeeded(member)
        return member, reply

    def _auth(self) -> dict[str, str]:
        token = self._token
        return {"Authorization": f"Bearer {token.current()}"} if token is not None else {}

    def _failed(self, member: str, ask: BlockAsk, why: str) -> None:
        """The member is not one to ask for now: left out for a back-off."""
        self._metrics.peer_requests.labels(member, "error").inc()
        backoff = self._health.failed(member)
        self._metrics.peer_backoffs.labels(member).inc()
        log.warning(
            "cache peer %s failed (%s); reading its blocks elsewhere for %g s", member, why, backoff
        )
