"""What a write pass left in the object store (or in the local-disk directory).

The parent talks to the moto server directly, not through the latency proxy, so that
polling and checking add no latency of their own to what is measured.

- ``listing``: every object under a prefix with its size (directory markers left out);
- ``wait_complete``: poll until every expected object is there at its expected size;
- ``verify``: every size, plus the SHA-256 of a sample of the files, against what the
  pass wrote; each difference is an error message, never a silent pass;
- ``delete_prefix``: remove a pass's objects, so that moto's memory does not grow.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.writeload import expected_digest

POLL_S = 0.2
SAMPLE = 20  # small files whose content is hashed, evenly spread (first and last included)


@dataclass(frozen=True)
class Expected:
    """One file a pass wrote: its key (relative to the mount root), id and size."""

    key: str
    file_id: int
    size: int


def listing(client: Any, bucket: str, prefix: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            if not obj["Key"].endswith("/"):
                out[obj["Key"]] = int(obj["Size"])
    return out


def local_listing(root: Path, prefix: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for dirpath, _, names in os.walk(root / prefix):
        for name in names:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = path.stat().st_size
    return out


def missing(found: dict[str, int], expected: list[Expected]) -> int:
    return sum(1 for e in expected if found.get(e.key) != e.size)


def wait_complete(
    client: Any, bucket: str, prefix: str, expected: list[Expected], timeout: float
) -> tuple[float | None, int]:
    """Poll until all of ``expected`` is listed at full size: (the wall time then, 0), or
    (None, how many were still missing) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        left = missing(listing(client, bucket, prefix), expected)
        if left == 0:
            return time.time(), 0
        if time.monotonic() > deadline:
            return None, left
        time.sleep(POLL_S)


def sample(expected: list[Expected]) -> list[Expected]:
    if len(expected) <= SAMPLE:
        return list(expected)
    step = (len(expected) - 1) / (SAMPLE - 1)
    return [expected[round(i * step)] for i in range(SAMPLE)]


def s3_digest(client: Any, bucket: str, key: str) -> str:
    h = hashlib.sha256()
    body = client.get_object(Bucket=bucket, Key=key)["Body"]
    for part in body.iter_chunks(8 << 20):
        h.update(part)
    return h.hexdigest()


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while part := f.read(8 << 20):
            h.update(part)
    return h.hexdigest()


def verify(
    found: dict[str, int], expected: list[Expected], digest: Callable[[str], str]
) -> tuple[list[str], int]:
    """Compare ``found`` (key -> size) with ``expected``; hash the sample with ``digest``.
    Returns (errors, how many contents were hashed and matched)."""
    errors: list[str] = []
    want = {e.key: e for e in expected}
    absent = [e.key for e in expected if e.key not in found]
    wrong = [f"{k}: {found[k]} bytes, not {e.size}" for k, e in want.items() if
             k in found and found[k] != e.size]  # fmt: skip
    extra = sorted(set(found) - set(want))
    if absent:
        errors.append(f"{len(absent)} of {len(expected)} files missing, e.g. {absent[:3]}")
    if wrong:
        errors.append(f"{len(wrong)} files of the wrong size, e.g. {wrong[:3]}")
    if extra:
        errors.append(f"{len(extra)} unexpected objects, e.g. {extra[:3]}")
    matched = 0
    for e in sample(expected):
        if found.get(e.key) != e.size:
            continue
        try:
            got = digest(e.key)
        except Exception as exc:  # any failure to read back is an error
            errors.append(f"{e.key}: could not read back: {exc}")
            continue
        if got != expected_digest(e.file_id, e.size):
            errors.append(f"{e.key}: content differs (sha256 {got[:12]}...)")
        else:
            matched += 1
    return errors, matched


def delete_prefix(client: Any, bucket: str, prefix: str) -> None:
    keys: list[dict[str, str]] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend({"Key": obj["Key"]} for obj in page.get("Contents", []))
    for i in range(0, len(keys), 1000):
        client.delete_objects(Bucket=bucket, Delete={"Objects": keys[i : i + 1000]})
