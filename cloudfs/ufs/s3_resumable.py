"""A multipart upload that survives the process: its progress lives in a state file.

The write-back uploader may be killed in the middle of a 10 GiB checkpoint.
Starting over would upload it twice; instead each completed part's ETag is
recorded (write to a temporary name, fsync, rename) in the state file the
caller names, next to the journaled file. A later call with the same state
file, key, size and mtime asks S3 which parts it holds (``ListParts``) and
uploads only the others, then completes the upload and deletes the state
file. If S3 no longer knows the upload (aborted, expired by a lifecycle
rule), it starts a new one.

Without a state file it is the same upload, only not resumable (write-through).

Parts are uploaded by a few threads; every S3 call goes through the client's
own timeouts and bounded retries. A CompleteMultipartUpload that is retried
after its answer was lost (S3 can take seconds to assemble a large object;
a read timeout fires) finds the upload gone (NoSuchUpload): the object is then
checked to carry the ETag of exactly these parts, and the upload succeeded.

An upload left behind by a file that was then deleted or rewritten is not
aborted here: buckets should carry the usual lifecycle rule for incomplete
multipart uploads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

PART_THREADS = 4


@dataclass
class UploadState:
    bucket: str
    key: str
    size: int
    mtime_ns: int
    upload_id: str
    part_size: int
    parts: dict[int, str] = field(default_factory=dict)  # part number -> ETag


def upload(
    client: Any,
    bucket: str,
    key: str,
    path: str,
    state_path: str | None,
    part_size: int,
    threads: int = PART_THREADS,
) -> None:
    """Upload ``path`` as ``key`` in parts of ``part_size``, resuming from ``state_path``."""
    st = os.stat(path)
    state = _load(state_path) if state_path is not None else None
    if state is not None and (state.bucket, state.key, state.size, state.mtime_ns) != (
        bucket, key, st.st_size, st.st_mtime_ns,
    ):  # fmt: skip
        state = None  # another file, or the same name rewritten: start over
    if state is not None:
        held = _parts_on_server(client, state)
        if held is None:
            state = None
        else:
            state.parts = held
    if state is None:
        created = client.create_multipart_upload(Bucket=bucket, Key=key)
        state = UploadState(bucket, key, st.st_size, st.st_mtime_ns, created["UploadId"], part_size)
        if state_path is not None:
            _save(state_path, state)
    count = max(1, -(-state.size // state.part_size))
    todo = [n for n in range(1, count + 1) if n not in state.parts]
    lock = threading.Lock()

    def send(number: int) -> None:
        offset = (number - 1) * state.part_size
        with open(path, "rb") as f:
            f.seek(offset)
            body = f.read(state.part_size)
        resp = client.upload_part(
            Bucket=bucket, Key=key, UploadId=state.upload_id, PartNumber=number, Body=body
        )
        with lock:
            state.parts[number] = resp["ETag"]
            if state_path is not None:
                _save(state_path, state)

    with ThreadPoolExecutor(threads) as pool:
        for result in [pool.submit(send, n) for n in todo]:
            result.result()  # the first failure propagates; the others finish first
    _complete(client, state)
    if state_path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state_path)


def _complete(client: Any, state: UploadState) -> None:
    numbers = sorted(state.parts)
    etags = [state.parts[n] for n in numbers]
    parts = [{"PartNumber": n, "ETag": state.parts[n]} for n in numbers]
    try:
        client.complete_multipart_upload(
            Bucket=state.bucket, Key=state.key, UploadId=state.upload_id,
            MultipartUpload={"Parts": parts},
        )  # fmt: skip
    except client.exceptions.NoSuchUpload:
        head = client.head_object(Bucket=state.bucket, Key=state.key)
        if head.get("ETag", "").strip('"') != multipart_etag(etags):
            raise  # the upload is gone and the object is not ours: fail, the caller retries
        # else: an earlier try of this complete was applied; its answer was lost


def multipart_etag(part_etags: list[str]) -> str:
    """S3's ETag of an object assembled from parts with these ETags (in order)."""
    digests = b"".join(bytes.fromhex(e.strip('"')) for e in part_etags)
    return f"{hashlib.md5(digests).hexdigest()}-{len(part_etags)}"


def _parts_on_server(client: Any, state: UploadState) -> dict[int, str] | None:
    """The parts S3 holds for the upload; None if it does not know the upload any more."""
    parts: dict[int, str] = {}
    marker = 0
    while True:
        try:
            resp = client.list_parts(
                Bucket=state.bucket, Key=state.key, UploadId=state.upload_id,
                PartNumberMarker=marker,
            )  # fmt: skip
        except client.exceptions.NoSuchUpload:
            return None
        for part in resp.get("Parts", []):
            parts[int(part["PartNumber"])] = part["ETag"]
        if not resp.get("IsTruncated"):
            return parts
        marker = int(resp["NextPartNumberMarker"])


def _load(path: str) -> UploadState | None:
    try:
        with open(path) as f:
            raw = json.load(f)
        raw["parts"] = {int(n): etag for n, etag in raw.get("parts", {}).items()}
        return UploadState(**raw)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _save(path: str, state: UploadState) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(asdict(state), f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
