"""The etcd KV engine: one tree shared by several stateless tree servers through etcd (Raft).

Keys live under ``prefix`` (several volumes, test runs or clusters of tree
servers share one etcd); scans never leave it. etcd is reached through its
v3 gRPC API (``etcd_grpc``), with endpoint failover: a 3-member cluster that
loses one member keeps serving.

Isolation. A read transaction reads at one revision: the first read's header
revision, passed as ``revision`` to every later range request, so it sees one
consistent snapshot. The first read is linearizable (it sees every commit
before it); later ones are ``serializable`` (the member asked answers from its
own copy of that revision, without asking the leader; a member that has not
applied it yet says so and the read is repeated linearizably).

A write transaction is optimistic: it reads at its snapshot revision S the
same way, except that its first read is served by the member asked too
(serializable: no round of the leader's ReadIndex, about 0.3-0.4 ms less per
change), and records what it saw (key -> ``mod_revision``, 0 when absent; for
scans, the key ranges read); writes are buffered (``get`` and ``scan`` see
them, merged in key order). Commit is one etcd Txn whose compares say that
every key read still has the ``mod_revision`` seen (a deleted key fails too)
and that no key in a scanned range has a ``mod_revision`` above S (a key
created there fails), and whose success ops are the buffered puts and deletes.
If a compare fails nothing is applied and ``TxnConflict`` (EAGAIN) is raised;
``kv_retry.write_txn`` runs the body again. Because the commit compares every
key read, a snapshot a little behind the leader costs at most a conflict. An
outcome that no commit checks (the body raised, EEXIST say, or wrote nothing
and returns what it read) is checked by a Txn of the same compares and no op,
which the leader answers: if a key changed, ``TxnConflict`` runs the body
again. After a conflict, the thread's next write transaction reads through the
leader, so a member that stays behind cannot make it lose again. Repeated reads of
a key come from the transaction's cache.

Every commit also puts a random id into this engine's *commit marker* for its
thread (``prefix`` + ``MARKERS`` + the engine's id + the thread's; scans skip
these keys). A commit that fails after it may have reached etcd (a member
died, a timeout) is sent again, to the next endpoint, with a failure branch
that reads that marker: if the compares fail and the marker holds this
commit's id, the first send was applied and the commit succeeded; otherwise
it was not, and ``TxnConflict`` lets ``write_txn`` run the body again on what
holds now. (Checking the written keys' values instead would take a commit
whose keys another commit changed meanwhile for one never applied, and run
it a second time: the etcd failover test caught a removal applied twice
that way.) A commit whose compares still hold after its own first send (one
that read none of the keys it writes) may be applied twice, to the same values.

Server settings: etcd 3.4's defaults are too small. A tree operation is one
etcd Txn, and a listing merge (``ufs_sync.merge_listing``) writes all the new
entries of a directory in one transaction: 2 puts and about 250 bytes per
entry (10,000 entries: 2.5 MB); refreshing a listed directory compares about
2 keys per entry. etcd checks compares, success ops and failure ops each
against ``--max-txn-ops`` (default 128) and the request against
``--max-request-bytes`` (default 1.5 MiB). Splitting such a commit would show
other servers half-merged directories, so it is not split; run etcd with::

    --max-txn-ops=65536 --max-request-bytes=16777216
    --auto-compaction-mode=periodic --auto-compaction-retention=1h

which merges a directory of up to ~30,000 new entries in one commit. A bigger
transaction fails whole with ``RemoteIOError`` naming the settings (a
directory listed before keeps serving its last listing; one never listed
answers EIO). Compaction keeps etcd's history bounded; a transaction whose
snapshot was compacted away (it would have to outlive the retention) conflicts.

Keys are at most 511 bytes (the protocol's limit, without ``prefix``).
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cloudfs.errors import RemoteIOError, StartupError, TxnConflict, UsageError
from cloudfs.etcdpb import rpc_pb2 as pb
from cloudfs.meta.engine import etcd_uri
from cloudfs.meta.engine.etcd_grpc import (
    INVALID_ARGUMENT,
    OUT_OF_RANGE,
    RESOURCE_EXHAUSTED,
    EtcdClient,
    EtcdError,
    OutcomeUnknown,
)
from cloudfs.meta.engine.etcd_lock import EtcdMutex, Fence
from cloudfs.meta.engine.etcd_txn import MARKERS, EtcdTxn, prefix_end
from cloudfs.meta.engine.etcd_uri import DEFAULT_PREFIX
from cloudfs.meta.engine.etcd_watch import EtcdWatch
from cloudfs.tls import ClientTLS

log = logging.getLogger(__name__)

COMMIT_SENDS = 8  # sends of one commit whose outcome stays unknown, ~3 s of pauses
DEFAULT_TIMEOUT = 5.0  # seconds: the deadline of each etcd call
DEFAULT_RETRY_FOR = 10.0  # seconds of failover before RemoteIOError


class EtcdKV:
    """A ``KVEngine`` over the etcd cluster at ``endpoints`` (client URLs), under ``prefix``."""

    def __init__(
        self,
        endpoints: list[str],
        prefix: bytes = DEFAULT_PREFIX,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        retry_for: float = DEFAULT_RETRY_FOR,
        tls: ClientTLS | None = None,
        server_name: str | None = None,
    ) -> None:
        if not prefix:
            raise ValueError("an empty prefix would share etcd's whole key space")
        self.prefix = prefix
        self._client = EtcdClient(endpoints, timeout, retry_for, tls=tls, server_name=server_name)
        self._fences = threading.local()  # a Fence while this thread holds a mutex
        # set when this thread's write transaction lost a race: its next one reads
        # through the leader, so a member that stays behind cannot make it lose again
        self._after_conflict = threading.local()
        self._markers = prefix + MARKERS + uuid.uuid4().hex.encode() + b"/"
        self._closed = False
        self._sent_commits = False  # whether this engine sent a commit (a marker may exist)

    def range(self, request: pb.RangeRequest) -> pb.RangeResponse:
        answer: pb.RangeResponse = self.call("Range", request)
        return answer

    def txn(self, request: pb.TxnRequest, *, idempotent: bool = True) -> pb.TxnResponse:
        answer: pb.TxnResponse = self.call("Txn", request, idempotent=idempotent)
        return answer

    def call(self, method: str, request: Any, *, idempotent: bool = True) -> Any:
        """A call of etcd's KV ``method``, its refusals turned into the protocol's errors."""
        try:
            return self._client.call(method, request, idempotent=idempotent)
        except EtcdError as exc:
            if exc.code == OUT_OF_RANGE and "compacted" in exc.detail:
                raise TxnConflict(f"snapshot compacted away: {exc.detail}") from exc
            too_big = exc.code == INVALID_ARGUMENT and (
                "too many" in exc.detail or "large" in exc.detail
            )
            if too_big or exc.code == RESOURCE_EXHAUSTED:
                log.error("etcd refused a transaction: %s (see cloudfs.meta.engine.kv_etcd)", exc)
                raise RemoteIOError(
                    f"{exc}: raise etcd's --max-txn-ops / --max-request-bytes"
                ) from exc
            raise

    @contextmanager
    def transaction(self, write: bool) -> Iterator[EtcdTxn]:
        if self._closed:
            raise ValueError("engine is closed")
        local_first = write and not getattr(self._after_conflict, "set", False)
        if write:
            self._after_conflict.set = False
        txn = EtcdTxn(self, self.prefix, write, local_first=local_first)
        fence: Fence | None = getattr(self._fences, "held", None) if write else None
        if fence is not None:  # the commit compares the lock key as if this txn had read it
            txn.seen[self.prefix + fence.key] = (fence.value, fence.mod_revision)
        try:
            yield txn
        except (TxnConflict, RemoteIOError):
            raise
        except Exception:
            txn.active = False
            if local_first:  # an error may come of a read that was behind
                self._check_current(txn)
            raise
        finally:
            txn.active = False
        request = txn.commit_request() if write else None
        if request is None:
            if local_first:  # what it returns may come of a read that was behind
                self._check_current(txn)
            return
        self._sent_commits = True
        marker = self._markers + str(threading.get_ident()).encode()
        commit_id = os.urandom(16)
        request.success.append(pb.RequestOp(request_put=pb.PutRequest(key=marker, value=commit_id)))
        try:
            self._commit(request, marker, commit_id)
        except TxnConflict:
            self._after_conflict.set = True
            if fence is not None and not self._still_held(fence):
                raise RemoteIOError(
                    f"this tree server lost the namespace lock {fence.key!r} (held too long?)"
                ) from None
            raise

    def _check_current(self, txn: EtcdTxn) -> None:
        """``TxnConflict`` unless every key ``txn`` read is still as it saw it (asked
        through the leader), so its outcome holds as of now."""
        request = txn.validation_request()
        if request is not None and not self.txn(request).succeeded:
            self._after_conflict.set = True
            raise TxnConflict("a write transaction's local read was behind the leader")

    def _still_held(self, fence: Fence) -> bool:
        kvs = self.range(pb.RangeRequest(key=self.prefix + fence.key)).kvs
        return bool(kvs) and kvs[0].mod_revision == fence.mod_revision

    def _commit(self, request: pb.TxnRequest, marker: bytes, commit_id: bytes) -> None:
        """Send one commit (which puts ``commit_id`` into ``marker``); see the module
        docstring for what happens when its fate is unknown."""
        unknown: OutcomeUnknown | None = None
        for send in range(COMMIT_SENDS):
            if send:
                time.sleep(min(1.0, 0.05 * 2**send) * random.uniform(0.5, 1.0))
            try:
                answer = self.txn(request, idempotent=False)
            except OutcomeUnknown as exc:
                unknown = exc
                del request.failure[:]
                request.failure.append(pb.RequestOp(request_range=pb.RangeRequest(key=marker)))
                continue
            if answer.succeeded:
                return
            if unknown is None:
                raise TxnConflict("etcd transaction conflicted")
            if _marked(answer, commit_id):
                return  # the send whose answer was lost was applied
            raise TxnConflict("etcd transaction conflicted (after a lost answer, not applied)")
        raise RemoteIOError(f"etcd commit outcome unknown after {COMMIT_SENDS} sends") from unknown

    def mutex(self, key: bytes) -> EtcdMutex:
        """A lock at ``key`` that the tree servers sharing this etcd take in turn."""
        return EtcdMutex(self, key)

    def fence(self, fence: Fence | None) -> None:
        """While set (an ``EtcdMutex`` is held), this thread's write transactions commit
        only if the lock key is still as the mutex left it; ``None`` clears it."""
        self._fences.held = fence

    def watch(self, key: bytes, end: bytes) -> EtcdWatch:
        """The changes to keys in [``key``, ``end``) (relative to the prefix) from now on."""
        return EtcdWatch(self._client, self.prefix + key, self.prefix + end, strip=len(self.prefix))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:  # this engine's commit markers (a process that died leaves a few small keys)
            if self._sent_commits:
                gone = pb.DeleteRangeRequest(key=self._markers, range_end=prefix_end(self._markers))
                self._client.call_once("DeleteRange", gone, timeout=1.0)
        except RemoteIOError as exc:
            log.info("could not delete this engine's commit markers: %s", exc)
        self._client.close()


def _marked(answer: pb.TxnResponse, commit_id: bytes) -> bool:
    """Whether the failure branch's read shows the marker holding ``commit_id``."""
    if len(answer.responses) != 1:
        return False
    kvs = answer.responses[0].response_range.kvs
    return len(kvs) == 1 and kvs[0].value == commit_id


def open_engine(
    uri: str, timeout: float = DEFAULT_TIMEOUT, retry_for: float = DEFAULT_RETRY_FOR
) -> EtcdKV:
    """The engine of ``etcd://host:port[,host:port...][/prefix][?TLS parameters]``
    (prefix ``cloudfs/``; the parameters: ``etcd_uri``).

    Raises:
        UsageError: a malformed URI, or a TLS file that cannot be used.
        StartupError: no endpoint answers a read.
    """
    target = etcd_uri.parse(uri)
    try:
        engine = EtcdKV(
            target.endpoints,
            target.prefix,
            timeout,
            retry_for=retry_for,
            tls=target.tls,
            server_name=target.server_name,
        )
    except ValueError as e:
        raise UsageError(f"bad engine '{uri}': {e}") from None
    try:
        with engine.transaction(write=False) as txn:
            txn.get(b"")
    except RemoteIOError as e:
        engine.close()
        where = ", ".join(target.endpoints)
        raise StartupError(f"cannot reach etcd at {where}: {e}{_tls_hint(target)}") from None
    return engine


def _tls_hint(target: etcd_uri.EtcdTarget) -> str:
    """What to add to the URI if etcd refused this client's TLS (or its lack of it)."""
    if target.tls is None:
        return "; if etcd serves TLS, add ?cacert=FILE (its CA)"
    if target.tls.cert is None:
        return "; if etcd asks for client certificates (--client-cert-auth), add cert= and key="
    return ""
