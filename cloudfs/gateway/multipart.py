"""Multipart uploads: parts staged as local files, joined and committed on completion.

An upload is a directory ``STAGING/uploads/<id>/`` holding ``upload.json``
(bucket, key, when) and its parts ``NNNNN`` (each written to a temporary
name, then renamed: a part sent again replaces the old one whole). Nothing
reaches the volume before CompleteMultipartUpload, which claims the upload
by renaming its directory (a second Complete or an Abort racing it finds no
upload), joins the parts in order into one staged file and commits it as a
PUT would: readers see the old object or the whole new one.

Part ETags are the MD5 of the part, as S3's; the completed object's ETag is
the tree's (the one GET, HEAD and If-Match use), not S3's ``md5-of-md5s-N``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid

from cloudfs.gateway.context import Gateway
from cloudfs.gateway.errors import S3Error
from cloudfs.gateway.exchange import Request, Response, xml_response
from cloudfs.gateway.keys import parse_key
from cloudfs.gateway.objects import (
    _range,
    commit_staged,
    iso_date,
    quoted_etag,
    stage_copy,
)
from cloudfs.gateway.xmlio import MAX_XML_BODY, Tree, parse_complete, render

MAX_PARTS = 10000
MIN_PART = 5 * 1024 * 1024  # every part but the last
MAX_PART = 5 * 1024**3
CHUNK = 1024 * 1024


def _upload_dir(gw: Gateway, req: Request) -> str:
    upload_id = req.query.get("uploadId", "")
    path = os.path.join(gw.uploads_dir, upload_id)
    if not upload_id.isalnum() or not os.path.isfile(os.path.join(path, "upload.json")):
        raise _no_such_upload(req)
    with open(os.path.join(path, "upload.json")) as f:
        meta = json.load(f)
    if meta["bucket"] != req.bucket or meta["key"] != req.key:
        raise _no_such_upload(req)
    return path


def _no_such_upload(req: Request) -> S3Error:
    return S3Error(
        "NoSuchUpload",
        404,
        "The specified upload does not exist. The upload ID may be invalid, or the upload may"
        " have been aborted or completed.",
        resource=req.resource,
    )


def create(gw: Gateway, req: Request) -> Response:
    handle = gw.buckets.handle(req.bucket)
    path = parse_key(req.key, bucket=req.bucket)
    if path.is_dir_marker:
        raise S3Error(
            "InvalidArgument",
            400,
            "a key ending in '/' is a directory: it cannot hold bytes",
            resource=req.resource,
        )
    handle.check_target(path.parts, exclusive=False)
    upload_id = uuid.uuid4().hex
    folder = os.path.join(gw.uploads_dir, upload_id)
    os.makedirs(folder)
    with open(os.path.join(folder, "upload.json"), "w") as f:
        json.dump({"bucket": req.bucket, "key": req.key, "initiated": time.time_ns()}, f)
    return xml_response(
        render(
            "InitiateMultipartUploadResult",
            [("Bucket", req.bucket), ("Key", req.key), ("UploadId", upload_id)],
        )
    )


def _part_number(req: Request) -> int:
    text = req.query.get("partNumber", "")
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_PARTS:
        raise S3Error(
            "InvalidArgument",
            400,
            "Part number must be an integer between 1 and 10000, inclusive",
            resource=req.resource,
        )
    return int(text)


def upload_part(gw: Gateway, req: Request) -> Response:
    number = _part_number(req)
    folder = _upload_dir(gw, req)
    if "x-amz-copy-source" in req.headers:
        return _upload_part_copy(gw, req, folder, number)
    if req.content_length is not None and req.content_length > MAX_PART:
        raise S3Error(
            "EntityTooLarge",
            400,
            "Your proposed upload exceeds the maximum allowed size",
            resource=req.resource,
        )
    fd, temp = tempfile.mkstemp(prefix=".part-", dir=folder)
    digest = hashlib.md5(usedforsecurity=False)
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := req.body.read(CHUNK):
                out.write(chunk)
                digest.update(chunk)
        etag = digest.hexdigest()
        with open(temp + ".etag", "w") as f:
            f.write(etag)
        os.replace(temp + ".etag", os.path.join(folder, f"{number:05d}.etag"))
        os.replace(temp, os.path.join(folder, f"{number:05d}"))
    except BaseException:
        for leftover in (temp, temp + ".etag"):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
        raise
    return Response(200, {"ETag": f'"{etag}"'})


def _upload_part_copy(gw: Gateway, req: Request, folder: str, number: int) -> Response:
    span = None
    if "x-amz-copy-source-range" in req.headers:
        # An unsatisfiable range fails once the source's size is known (stage_copy).
        span = _range(req.headers["x-amz-copy-source-range"], 1 << 62, req.resource)
        if span is None:
            raise S3Error(
                "InvalidArgument",
                400,
                "x-amz-copy-source-range must be bytes=first-last",
                resource=req.resource,
            )
    staged, _ = stage_copy(gw, req, span)
    digest = hashlib.md5(usedforsecurity=False)
    with open(staged, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    etag = digest.hexdigest()
    with open(staged + ".etag", "w") as f:
        f.write(etag)
    os.replace(staged + ".etag", os.path.join(folder, f"{number:05d}.etag"))
    os.replace(staged, os.path.join(folder, f"{number:05d}"))
    return xml_response(
        render(
            "CopyPartResult", [("LastModified", iso_date(time.time_ns())), ("ETag", f'"{etag}"')]
        )
    )


def _parts(folder: str) -> list[tuple[int, str, int]]:
    """(number, etag, size) of the parts staged so far, by number."""
    found = []
    for name in sorted(os.listdir(folder)):
        if name.isascii() and name.isdigit():
            with open(os.path.join(folder, name + ".etag")) as f:
                etag = f.read()
            found.append((int(name), etag, os.path.getsize(os.path.join(folder, name))))
    return found


def complete(gw: Gateway, req: Request) -> Response:
    handle = gw.buckets.handle(req.bucket)
    path = parse_key(req.key, bucket=req.bucket)
    folder = _upload_dir(gw, req)
    wanted = parse_complete(req.read_body(MAX_XML_BODY))
    numbers = [p.number for p in wanted]
    if numbers != sorted(set(numbers)):
        raise S3Error(
            "InvalidPartOrder",
            400,
            "The list of parts was not in ascending order. The parts list must be specified"
            " in order by part number.",
            resource=req.resource,
        )
    staged_parts = {number: (etag, size) for number, etag, size in _parts(folder)}
    for i, part in enumerate(wanted):
        held = staged_parts.get(part.number)
        if held is None or held[0] != part.etag:
            raise S3Error(
                "InvalidPart",
                400,
                f"One or more of the specified parts could not be found (part {part.number}).",
                resource=req.resource,
            )
        if held[1] < MIN_PART and i < len(wanted) - 1:
            raise S3Error(
                "EntityTooSmall",
                400,
                f"Your proposed upload is smaller than the minimum allowed object size (part"
                f" {part.number}: every part but the last must be 5 MiB or more).",
                resource=req.resource,
            )
    claimed = folder + ".completing"
    try:
        os.rename(folder, claimed)  # one Complete (or Abort) wins the upload
    except OSError:
        raise _no_such_upload(req) from None
    try:
        fd, staged = tempfile.mkstemp(prefix="mpu-", dir=gw.staging_dir)
        with os.fdopen(fd, "wb") as out:
            for part in wanted:
                with open(os.path.join(claimed, f"{part.number:05d}"), "rb") as src:
                    shutil.copyfileobj(src, out, CHUNK)
        attr = commit_staged(handle, path, staged, req.resource)
    except BaseException:
        with contextlib.suppress(OSError):
            os.rename(claimed, folder)  # the client may try the Complete again
        raise
    shutil.rmtree(claimed, ignore_errors=True)
    return xml_response(
        render(
            "CompleteMultipartUploadResult",
            [
                ("Location", f"/{req.bucket}/{req.key}"),
                ("Bucket", req.bucket),
                ("Key", req.key),
                ("ETag", quoted_etag(attr)),
            ],
        )
    )


def abort(gw: Gateway, req: Request) -> Response:
    folder = _upload_dir(gw, req)
    claimed = folder + ".aborting"
    try:
        os.rename(folder, claimed)
    except OSError:
        raise _no_such_upload(req) from None
    shutil.rmtree(claimed, ignore_errors=True)
    return Response(204)


def list_parts(gw: Gateway, req: Request) -> Response:
    folder = _upload_dir(gw, req)
    marker = req.query.get("part-number-marker", "0")
    limit = req.query.get("max-parts", "1000")
    start = int(marker) if (marker.isascii() and marker.isdigit()) else 0
    most = min(int(limit), 1000) if (limit.isascii() and limit.isdigit()) else 1000
    parts = [p for p in _parts(folder) if p[0] > start]
    shown, truncated = parts[:most], len(parts) > most
    rows: Tree = [
        (
            "Part",
            [
                ("PartNumber", n),
                ("LastModified", iso_date(time.time_ns())),
                ("ETag", f'"{e}"'),
                ("Size", s),
            ],
        )
        for n, e, s in shown
    ]
    fields: Tree = [
        ("Bucket", req.bucket),
        ("Key", req.key),
        ("UploadId", req.query.get("uploadId", "")),
        ("PartNumberMarker", start),
        ("NextPartNumberMarker", shown[-1][0] if shown else start),
        ("MaxParts", most),
        ("IsTruncated", truncated),
        ("StorageClass", "STANDARD"),
    ]
    return xml_response(render("ListPartsResult", fields + rows))


def list_uploads(gw: Gateway, req: Request) -> Response:
    gw.buckets.handle(req.bucket)
    prefix = req.query.get("prefix", "")
    rows: Tree = []
    with contextlib.suppress(FileNotFoundError):
        for upload_id in sorted(os.listdir(gw.uploads_dir)):
            meta_path = os.path.join(gw.uploads_dir, upload_id, "upload.json")
            try:
                with open(meta_path) as f:
                    meta = json.load(f)
            except (OSError, ValueError):
                continue
            if meta["bucket"] == req.bucket and meta["key"].startswith(prefix):
                rows.append(
                    (
                        "Upload",
                        [
                            ("Key", meta["key"]),
                            ("UploadId", upload_id),
                            ("Initiated", iso_date(meta["initiated"])),
                            ("StorageClass", "STANDARD"),
                        ],
                    )
                )
    rows.sort(key=lambda row: row[1][0][1].encode())  # type: ignore[index]
    fields: Tree = [
        ("Bucket", req.bucket),
        ("Prefix", prefix),
        ("MaxUploads", 1000),
        ("IsTruncated", False),
    ]
    return xml_response(render("ListMultipartUploadsResult", fields + rows))
