"""One etcd transaction of ``EtcdKV``: snapshot reads, buffered writes, the commit request.

``kv_etcd`` documents the isolation this gives; this module keeps the state:
the snapshot revision (set by the first read), what was read (key ->
``mod_revision``, 0 when absent; scanned key ranges), and the buffered writes
(sorted, so scans merge them in). ``commit_request`` turns that into one
etcd ``TxnRequest``; the engine sends it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Protocol

from cloudfs.etcdpb import rpc_pb2 as pb
from cloudfs.meta.engine.etcd_grpc import OUT_OF_RANGE, EtcdError

KEY_MAX = 511
PAGE = 1000  # keys per range request of a scan
MARKERS = b"\xff\xffcommits/"  # under the prefix: the engine's commit markers (kv_etcd); scans skip
MANY = 128  # range reads per Txn of get_many (etcd's default --max-txn-ops)

MOD, EQUAL, LESS = pb.Compare.MOD, pb.Compare.EQUAL, pb.Compare.LESS


class Calls(Protocol):
    """What a transaction sends its reads through (``EtcdKV``)."""

    def range(self, request: pb.RangeRequest) -> pb.RangeResponse: ...

    def txn(self, request: pb.TxnRequest, *, idempotent: bool = True) -> pb.TxnResponse: ...


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key after every key starting with ``prefix`` (b"\\0": no end)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\0"
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _before(key: bytes, end: bytes) -> bool:
    return end == b"\0" or key < end


class EtcdTxn:
    """A transaction reading through ``etcd`` (an ``EtcdKV``), its keys under ``prefix``."""

    def __init__(self, etcd: Calls, prefix: bytes, write: bool, *, local_first: bool) -> None:
        self._etcd = etcd
        self._prefix = prefix
        self._write = write
        # the first read served by the member asked (serializable), not through the
        # leader: it may be a little behind, which only a write transaction may risk
        # (kv_etcd: its commit or ``validation_request`` checks what it read)
        self.local_first = local_first
        self.revision = 0  # the snapshot, set by the first read
        self.seen: dict[bytes, tuple[bytes | None, int]] = {}  # key -> (value, mod_revision)
        self.ranges: list[tuple[bytes, bytes]] = []  # scanned [start, end) (write only)
        self.writes: dict[bytes, bytes | None] = {}  # key -> value, None: delete
        self._written: list[bytes] = []  # the keys of ``writes``, sorted
        self.active = True

    def _check(self, key: bytes | None = None, writing: bool = False) -> None:
        if not self.active:
            raise ValueError("transaction is finished")
        if writing and not self._write:
            raise ValueError("write in a read-only transaction")
        if key is not None and len(key) > KEY_MAX:
            raise ValueError(f"key of {len(key)} bytes (at most {KEY_MAX})")

    def _range(
        self, key: bytes, end: bytes | None, limit: int
    ) -> tuple[list[tuple[bytes, bytes]], bool]:
        request = pb.RangeRequest(key=key, range_end=end or b"", limit=limit)
        if self.revision:
            answer = self._at_snapshot(request)
        else:  # the first read: linearizable (it sees every commit before it) or local
            request.serializable = self.local_first
            answer = self._etcd.range(request)
            self.revision = answer.header.revision
        pairs = []
        for kv in answer.kvs:
            self.seen[kv.key] = (kv.value, kv.mod_revision)
            pairs.append((kv.key, kv.value))
        return pairs, answer.more

    def _at_snapshot(self, request: pb.RangeRequest) -> pb.RangeResponse:
        """A read at the snapshot revision, served by the member asked (no leader round trip)."""
        request.revision = self.revision
        request.serializable = True
        try:
            return self._etcd.range(request)
        except EtcdError as exc:
            if not _behind(exc):
                raise
        request.serializable = False
        return self._etcd.range(request)

    def get(self, key: bytes) -> bytes | None:
        self._check(key)
        full = self._prefix + key
        if full in self.writes:
            return self.writes[full]
        if full not in self.seen:
            pairs, _ = self._range(full, None, 0)
            if not pairs:
                self.seen[full] = (None, 0)
        return self.seen[full][0]

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        """The values of ``keys``: those not read yet come in Txns of ``MANY`` range reads
        each (one round trip per ``MANY`` keys, at the snapshot revision)."""
        self._check()
        for key in keys:
            self._check(key)
        fulls = [self._prefix + k for k in keys]
        wanted = [f for f in dict.fromkeys(fulls) if f not in self.writes and f not in self.seen]
        for i in range(0, len(wanted), MANY):
            self._read_many(wanted[i : i + MANY])
        return [self.writes[f] if f in self.writes else self.seen[f][0] for f in fulls]

    def _read_many(self, fulls: list[bytes]) -> None:
        # served by the member asked (every range of the Txn, or none): at the snapshot,
        # or as the first read of a write transaction
        local = bool(self.revision) or self.local_first
        try:
            answer = self._etcd.txn(self._reads(fulls, local))
        except EtcdError as exc:
            if not (local and self.revision and _behind(exc)):
                raise
            answer = self._etcd.txn(self._reads(fulls, False))
        if not self.revision:  # the first read of this transaction: its snapshot
            self.revision = answer.header.revision
        for full, response in zip(fulls, answer.responses, strict=True):
            kvs = response.response_range.kvs
            self.seen[full] = (kvs[0].value, kvs[0].mod_revision) if kvs else (None, 0)

    def _reads(self, fulls: list[bytes], serializable: bool) -> pb.TxnRequest:
        ops = [
            pb.RequestOp(
                request_range=pb.RangeRequest(
                    key=f, revision=self.revision, serializable=serializable
                )
            )
            for f in fulls
        ]
        return pb.TxnRequest(success=ops)

    def put(self, key: bytes, value: bytes) -> None:
        self._check(key, writing=True)
        self._buffer(self._prefix + key, bytes(value))

    def delete(self, key: bytes) -> None:
        self._check(key, writing=True)
        self._buffer(self._prefix + key, None)

    def _buffer(self, full: bytes, value: bytes | None) -> None:
        if full not in self.writes:
            bisect.insort(self._written, full)
        self.writes[full] = value

    def scan(
        self, prefix: bytes, start_after: bytes | None = None, limit: int | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        self._check()
        base = self._prefix
        if start_after is not None and start_after >= prefix:
            start = base + start_after + b"\0"
        else:
            start = base + prefix
        end = prefix_end(base + prefix)
        markers = base + MARKERS
        count = 0
        while (limit is None or count < limit) and _before(start, end):
            self._check()
            want = PAGE if limit is None else min(PAGE, limit - count)
            pairs, more = self._range(start, end, want)
            stop = pairs[-1][0] + b"\0" if more else end
            if self._write:
                self.ranges.append((start, stop))
            for key, value in self._merged(pairs, start, stop):
                if limit is not None and count >= limit:
                    return
                if key.startswith(markers):
                    continue
                yield key[len(base) :], value
                count += 1
            start = stop

    def _merged(
        self, pairs: list[tuple[bytes, bytes]], start: bytes, stop: bytes
    ) -> Iterator[tuple[bytes, bytes]]:
        """``pairs`` (keys in [start, stop)) with this transaction's writes applied, in order."""
        lo = bisect.bisect_left(self._written, start)
        hi = len(self._written) if stop == b"\0" else bisect.bisect_left(self._written, stop)
        mine = self._written[lo:hi]
        merged: dict[bytes, bytes | None] = dict(pairs)
        merged.update((k, self.writes[k]) for k in mine)
        for key in sorted(merged) if mine else merged:
            value = merged[key]
            if value is not None:
                yield key, value

    def commit_request(self) -> pb.TxnRequest | None:
        """The etcd Txn that commits this transaction; None when it wrote nothing."""
        if not self.writes:
            return None
        ops = [
            pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=k))
            if v is None
            else pb.RequestOp(request_put=pb.PutRequest(key=k, value=v))
            for k, v in self.writes.items()
        ]
        return pb.TxnRequest(compare=self._compares(), success=ops)

    def validation_request(self) -> pb.TxnRequest | None:
        """A Txn that succeeds only if what this transaction read still holds (its
        compares, no op), for an outcome no commit checks: an error or nothing written
        after a local first read. None when it read nothing."""
        if not self.seen and not self.ranges:
            return None
        return pb.TxnRequest(compare=self._compares())

    def _compares(self) -> list[pb.Compare]:
        """Every key read still at the ``mod_revision`` seen; no key in a scanned range
        changed after the snapshot."""
        compares = [
            pb.Compare(key=k, target=MOD, result=EQUAL, mod_revision=mod)
            for k, (_, mod) in self.seen.items()
        ]
        compares += [
            pb.Compare(
                key=start, range_end=stop, target=MOD, result=LESS, mod_revision=self.revision + 1
            )
            for start, stop in _coalesce(self.ranges)
        ]
        return compares


def _behind(exc: EtcdError) -> bool:
    """Whether a read at the snapshot failed only because the member asked has not
    applied it yet (after a failover): read again through the leader."""
    return exc.code == OUT_OF_RANGE and "future revision" in exc.detail


def _coalesce(ranges: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Overlapping or touching ranges as one (the pages of one scan, a directory read twice)."""
    out: list[tuple[bytes, bytes]] = []
    for start, stop in sorted(set(ranges)):
        if out and (out[-1][1] == b"\0" or start <= out[-1][1]):
            last_start, last_stop = out[-1]
            if last_stop != b"\0" and (stop == b"\0" or stop > last_stop):
                out[-1] = (last_start, stop)
        else:
            out.append((start, stop))
    return out
