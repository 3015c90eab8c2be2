"""One etcd transaction of ``EtcdKV``: snapshot reads, buffered writes, the commit request.

``kv_etcd`` documents the isolation this gives; this module keeps the state:
the snapshot revision (set by the first read), what was read (key ->
``mod_revision``, 0 when absent; scanned key ranges), and the buffered writes
(sorted, so scans merge them in). ``commit_request`` turns that into the body
of one etcd Txn; the engine sends it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from typing import Any

from cloudfs.meta.engine.etcd_gateway import OUT_OF_RANGE, EtcdError, b64, unb64

KEY_MAX = 511
PAGE = 1000  # keys per range request of a scan
MANY = 128  # range reads per Txn of get_many (etcd's default --max-txn-ops)

Call = Callable[[str, dict[str, Any]], Any]


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key after every key starting with ``prefix`` (b"\\0": no end)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\0"
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _before(key: bytes, end: bytes) -> bool:
    return end == b"\0" or key < end


class EtcdTxn:
    """A transaction reading through ``call`` (``EtcdKV.call``), its keys under ``prefix``."""

    def __init__(self, call: Call, prefix: bytes, write: bool) -> None:
        self._call = call
        self._prefix = prefix
        self._write = write
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

    def _range(self, key: bytes, end: bytes | None, limit: int) -> tuple[list[Any], bool]:
        body: dict[str, Any] = {"key": b64(key)}
        if end is not None:
            body["range_end"] = b64(end)
        if limit:
            body["limit"] = str(limit)
        if self.revision:
            answer = self._at_snapshot(body)
        else:  # the first read: linearizable, it sees every commit before it
            answer = self._call("/v3/kv/range", body)
            self.revision = int(answer["header"]["revision"])
        pairs = []
        for kv in answer.get("kvs", []):
            item = (unb64(kv["key"]), unb64(kv.get("value", "")), int(kv["mod_revision"]))
            self.seen[item[0]] = item[1:]
            pairs.append(item[:2])
        return pairs, bool(answer.get("more", False))

    def _at_snapshot(self, body: dict[str, Any]) -> Any:
        """A read at the snapshot revision, served by the member asked (no leader round trip)."""
        body["revision"] = str(self.revision)
        try:
            return self._call("/v3/kv/range", {**body, "serializable": True})
        except EtcdError as exc:  # a member behind the snapshot (after a failover)
            if exc.code != OUT_OF_RANGE or "future revision" not in exc.detail:
                raise
        return self._call("/v3/kv/range", body)

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
        at = {"revision": str(self.revision)} if self.revision else {}
        ops = [{"request_range": {"key": b64(f), **at}} for f in fulls]
        answer = self._call("/v3/kv/txn", {"success": ops})
        if not self.revision:  # the first read of this transaction: its snapshot
            self.revision = int(answer["header"]["revision"])
        for full, response in zip(fulls, answer.get("responses", []), strict=True):
            kvs = response.get("response_range", {}).get("kvs", [])
            if kvs:
                self.seen[full] = (unb64(kvs[0].get("value", "")), int(kvs[0]["mod_revision"]))
            else:
                self.seen[full] = (None, 0)

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

    def commit_request(self) -> dict[str, Any] | None:
        """The etcd Txn that commits this transaction; None when it wrote nothing."""
        if not self.writes:
            return None
        compares = [
            {"key": b64(k), "target": "MOD", "result": "EQUAL", "mod_revision": str(mod)}
            for k, (_, mod) in self.seen.items()
        ]
        compares += [
            {
                "key": b64(start),
                "range_end": b64(stop),
                "target": "MOD",
                "result": "LESS",
                "mod_revision": str(self.revision + 1),
            }
            for start, stop in _coalesce(self.ranges)
        ]
        ops = [
            {"request_delete_range": {"key": b64(k)}}
            if v is None
            else {"request_put": {"key": b64(k), "value": b64(v)}}
            for k, v in self.writes.items()
        ]
        return {"compare": compares, "success": ops}


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
