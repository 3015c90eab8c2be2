"""Objects: GetObject, HeadObject, PutObject, DeleteObject(s), CopyObject.

Reads go through ``VolumeHandle.read`` (the node's block cache), a block at a
time, so a large object streams. Writes are staged to a local file and
committed with ``VolumeHandle.commit`` (the mount's write-through): readers see
the old bytes or the new ones, never part of them, and of concurrent PUTs of
one key the last commit wins whole. S3's metadata (Content-Type,
``x-amz-meta-*``) is not stored: every object is ``binary/octet-stream``.
"""

from __future__ import annotations

import contextlib
import email.utils
import errno
import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from datetime import datetime, timezone
from urllib.parse import unquote

from cloudfs.client.readahead import SequentialReads
from cloudfs.client.volume import VolumeHandle
from cloudfs.data.blocks import ObjectRef
from cloudfs.errors import AlreadyExists, FsError, NotADirectory, NotEmpty, NotFound
from cloudfs.gateway.context import Gateway
from cloudfs.gateway.errors import S3Error
from cloudfs.gateway.exchange import Body, Request, Response, xml_response
from cloudfs.gateway.faults import s3_error
from cloudfs.gateway.keys import ObjectPath, parse_key
from cloudfs.gateway.xmlio import parse_delete, render
from cloudfs.types import Attr

EMPTY_ETAG = hashlib.md5(b"", usedforsecurity=False).hexdigest()
CONTENT_TYPE = "binary/octet-stream"
MAX_PUT = 5 * 1024**3  # S3's largest single PUT
STAGE_CHUNK = 1024 * 1024
FIRST_BYTES = 8 * 1024 * 1024  # read before the headers (see _first_bytes)
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def quoted_etag(attr: Attr) -> str:
    return f'"{attr.etag.strip(chr(34)) or EMPTY_ETAG}"' if attr.is_reg else f'"{EMPTY_ETAG}"'


def http_date(ns: int) -> str:
    return email.utils.formatdate(ns / 1e9, usegmt=True)


def iso_date(ns: int) -> str:
    moment = datetime.fromtimestamp(ns / 1e9, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


# -- reads --------------------------------------------------------------------


def _resolve(handle: VolumeHandle, path: ObjectPath, resource: str) -> Attr:
    """The object at the key: a regular file, or a directory for a marker key."""
    attr = handle.resolve(path.parts)
    if path.is_dir_marker and attr.is_dir:
        return attr
    if path.is_dir_marker or not attr.is_reg:
        raise S3Error("NoSuchKey", 404, "The specified key does not exist.", resource=resource)
    return attr


def get_object(gw: Gateway, req: Request, *, head: bool = False) -> Response:
    handle = gw.buckets.handle(req.bucket)
    path = parse_key(req.key, bucket=req.bucket)
    for attempt in (1, 2):
        attr = _resolve(handle, path, req.resource)
        ref = handle.object_ref(attr, path.parts) if attr.is_reg else ObjectRef("", "", 0)
        not_modified = _preconditions(req, attr)
        headers = {
            "ETag": quoted_etag(attr),
            "Last-Modified": http_date(attr.mtime_ns),
            "Accept-Ranges": "bytes",
            "Content-Type": CONTENT_TYPE,
        }
        if not_modified:
            return Response(304, headers)
        span = _range(req.headers.get("Range"), ref.size, req.resource)
        start, end = span or (0, ref.size)
        status = 206 if span else 200
        if span:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{ref.size}"
        if head:
            return Response(status, headers, b"", length=end - start)
        try:  # the first bytes before any header: a changed object is looked up again
            reads = handle.reads(ref, at=start, limit=end)
            first = _first_bytes(gw, reads, start, end)
        except FsError as e:
            if e.errno == errno.ESTALE and attempt == 1:
                continue
            raise
        return Response(status, headers, _blocks(gw, reads, start, end, first), end - start)
    raise AssertionError("unreachable")


def _first_bytes(gw: Gateway, reads: SequentialReads, start: int, end: int) -> bytes:
    """Up to ``FIRST_BYTES`` bytes from ``start``, whole blocks: an object that small is
    read before its headers go out, so one replaced meanwhile is looked up again
    instead of being cut short mid-body."""
    chunks = []
    pos, limit = start, min(end, start + max(FIRST_BYTES, gw.block_size))
    while pos < limit:
        data = _read_block(gw, reads, pos, end)
        if not data:
            raise FsError("the object ended early", errno=errno.ESTALE)
        chunks.append(data)
        pos += len(data)
    return b"".join(chunks)


def _read_block(gw: Gateway, reads: SequentialReads, pos: int, end: int) -> bytes:
    """The bytes from ``pos`` to the end of its cache block (or ``end``)."""
    stop = min(end, (pos // gw.block_size + 1) * gw.block_size)
    return reads(pos, stop) if pos < stop else b""


def _blocks(
    gw: Gateway, reads: SequentialReads, start: int, end: int, first: bytes
) -> Iterator[bytes]:
    yield first
    pos = start + len(first)
    while pos < end:
        data = _read_block(gw, reads, pos, end)
        if not data:
            raise FsError("the object ended early", errno=errno.ESTALE)  # it changed
        yield data
        pos += len(data)


def _range(value: str | None, size: int, resource: str) -> tuple[int, int] | None:
    """``Range: bytes=a-b | a- | -n`` as (start, end exclusive); ``None`` for no range or
    one S3 ignores (malformed, several ranges); ``InvalidRange`` when unsatisfiable."""
    if not value:
        return None
    match = _RANGE.fullmatch(value.strip())
    if match is None or match.group(1) == match.group(2) == "":
        return None
    first, last = match.group(1), match.group(2)
    if first == "":
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise _invalid_range(size, resource)
        return max(0, size - suffix), size
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= size:
        raise _invalid_range(size, resource)
    return start, min(size, int(last) + 1) if last else size


def _invalid_range(size: int, resource: str) -> S3Error:
    error = S3Error(
        "InvalidRange", 416, "The requested range is not satisfiable", resource=resource
    )
    error.headers = {"Content-Range": f"bytes */{size}"}  # type: ignore[attr-defined]
    return error


def _preconditions(req: Request, attr: Attr) -> bool:
    """Raise ``PreconditionFailed`` as S3 does; True when the answer is 304 Not Modified."""
    etag = quoted_etag(attr).strip('"')
    seconds = attr.mtime_ns // 1_000_000_000
    if_match = req.headers.get("If-Match")
    if if_match is not None:
        if not _etag_matches(if_match, etag):
            raise S3Error(
                "PreconditionFailed",
                412,
                "At least one of the pre-conditions you specified did not hold",
                resource=req.resource,
            )
    elif _date(req.headers.get("If-Unmodified-Since"), lambda since: seconds > since):
        raise S3Error(
            "PreconditionFailed",
            412,
            "At least one of the pre-conditions you specified did not hold",
            resource=req.resource,
        )
    if_none = req.headers.get("If-None-Match")
    if if_none is not None:
        return _etag_matches(if_none, etag)
    return _date(req.headers.get("If-Modified-Since"), lambda since: seconds <= since)


def _etag_matches(header: str, etag: str) -> bool:
    wanted = [t.strip().removeprefix("W/").strip('"') for t in header.split(",")]
    return "*" in wanted or etag in wanted


def _date(value: str | None, test: object) -> bool:
    if not value:
        return False
    try:
        since = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return False  # S3 ignores a date it cannot read
    return bool(test(since))  # type: ignore[operator]


# -- writes -------------------------------------------------------------------


def stage(gw: Gateway, body: Body, expected: int | None) -> str:
    """The body copied into a new file of the staging directory; its path."""
    os.makedirs(gw.staging_dir, exist_ok=True)
    fd, staged = tempfile.mkstemp(prefix="put-", dir=gw.staging_dir)
    try:
        written = 0
        with os.fdopen(fd, "wb") as out:
            while chunk := body.read(STAGE_CHUNK):
                out.write(chunk)
                written += len(chunk)
                if written > MAX_PUT:
                    raise S3Error(
                        "EntityTooLarge",
                        400,
                        "Your proposed upload exceeds the maximum allowed object size.",
                    )
        if expected is not None and written != expected:
            raise S3Error(
                "IncompleteBody",
                400,
                "You did not provide the number of bytes specified by the Content-Length"
                " HTTP header",
            )
        return staged
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staged)
        raise


def commit_staged(
    handle: VolumeHandle, path: ObjectPath, staged: str, resource: str, *, exclusive: bool = False
) -> Attr:
    """The staged file becomes the object (then the staged file is gone)."""
    try:
        return handle.commit(path.parts, staged, exclusive=exclusive)
    except AlreadyExists:
        if exclusive:
            raise S3Error(
                "PreconditionFailed", 412, "the key exists (If-None-Match: *)", resource=resource
            ) from None
        raise
    finally:
        with contextlib.suppress(OSError):
            os.unlink(staged)


def put_object(gw: Gateway, req: Request) -> Response:
    handle = gw.buckets.handle(req.bucket)
    path = parse_key(req.key, bucket=req.bucket)
    if req.content_length is not None and req.content_length > MAX_PUT:
        raise S3Error(
            "EntityTooLarge", 400, "Your proposed upload exceeds the maximum allowed object size."
        )
    if path.is_dir_marker:
        if req.body.read(1):
            raise S3Error(
                "InvalidArgument",
                400,
                "a key ending in '/' is a directory: it cannot hold bytes",
                resource=req.resource,
            )
        handle.makedirs(path.parts)
        return Response(200, {"ETag": f'"{EMPTY_ETAG}"'})
    exclusive = req.headers.get("If-None-Match", "").strip() == "*"
    try:
        handle.check_target(path.parts, exclusive=exclusive)
    except AlreadyExists:
        raise S3Error(
            "PreconditionFailed", 412, "the key exists (If-None-Match: *)", resource=req.resource
        ) from None
    staged = stage(gw, req.body, req.content_length if not _chunked(req) else None)
    attr = commit_staged(handle, path, staged, req.resource, exclusive=exclusive)
    return Response(200, {"ETag": quoted_etag(attr)})


def _chunked(req: Request) -> bool:
    """Whether Content-Length counts aws-chunked framing, not the object's bytes."""
    return "aws-chunked" in req.headers.get("Content-Encoding", "") or req.headers.get(
        "x-amz-content-sha256", ""
    ).startswith("STREAMING-")


def delete_object(gw: Gateway, req: Request) -> Response:
    handle = gw.buckets.handle(req.bucket)
    _delete(handle, parse_key(req.key, bucket=req.bucket))
    return Response(204)


def _delete(handle: VolumeHandle, path: ObjectPath) -> None:
    """Remove the object; no object there is success, as in S3. A marker key removes its
    directory only when empty: the children of a non-empty one still imply it.

    Directories the removal left empty are removed too, up to the bucket's root: in S3
    a prefix exists only while keys hold it, and ``aws s3 rm --recursive`` must leave
    nothing listed (s3a puts a marker back where it wants one)."""
    try:
        attr = handle.resolve(path.parts)
        if path.is_dir_marker != attr.is_dir:
            return  # "a" names no directory's object, "a/" no file
        handle.remove(path.parts)
    except (NotFound, NotADirectory, NotEmpty):
        return
    for depth in range(len(path.parts) - 1, 0, -1):
        try:
            handle.remove(path.parts[:depth])
        except FsError:  # not empty (or changed meanwhile): it stays, and so do its parents
            return


def delete_objects(gw: Gateway, req: Request) -> Response:
    handle = gw.buckets.handle(req.bucket)
    request = parse_delete(req.read_body(4 * 1024 * 1024))
    deleted: list[tuple[str, object]] = []
    errors: list[tuple[str, object]] = []
    for key in request.keys:
        try:
            _delete(handle, parse_key(key, bucket=req.bucket))
            if not request.quiet:
                deleted.append(("Deleted", [("Key", key)]))
        except (S3Error, FsError) as e:
            error = (
                e if isinstance(e, S3Error) else s3_error(e, f"/{req.bucket}/{key}", writing=True)
            )
            errors.append(
                ("Error", [("Key", key), ("Code", error.code), ("Message", error.message)])
            )
    return xml_response(render("DeleteResult", deleted + errors))  # type: ignore[arg-type]


# -- copies -------------------------------------------------------------------


def copy_source(req: Request) -> tuple[str, str]:
    """``x-amz-copy-source: /bucket/key`` (URL-encoded) as (bucket, key)."""
    source = unquote(req.headers["x-amz-copy-source"]).lstrip("/")
    source, _, version = source.partition("?versionId=")
    if version and version != "null":
        raise S3Error(
            "NotImplemented", 501, "CloudFS volumes keep no object versions", resource=req.resource
        )
    bucket, _, key = source.partition("/")
    if not bucket or not key:
        raise S3Error(
            "InvalidArgument", 400, "x-amz-copy-source must be /bucket/key", resource=req.resource
        )
    return bucket, key


def stage_copy(gw: Gateway, req: Request, span: tuple[int, int] | None = None) -> tuple[str, Attr]:
    """The copy source's bytes (``span``: part of them) read through the cache into a staged
    file; with the source's attributes."""
    bucket, key = copy_source(req)
    handle = gw.buckets.handle(bucket)
    path = parse_key(key, bucket=bucket)
    resource = f"/{bucket}/{key}"
    try:
        attr = _resolve(handle, path, resource)
    except FsError as e:
        raise s3_error(e, resource) from e
    ref = handle.object_ref(attr, path.parts) if attr.is_reg else ObjectRef("", "", 0)
    _copy_preconditions(req, attr)
    start, end = span or (0, ref.size)
    if span and end > ref.size:
        raise S3Error(
            "InvalidRange", 416, "The x-amz-copy-source-range is not satisfiable", resource=resource
        )
    os.makedirs(gw.staging_dir, exist_ok=True)
    fd, staged = tempfile.mkstemp(prefix="copy-", dir=gw.staging_dir)
    try:
        with os.fdopen(fd, "wb") as out:
            reads = handle.reads(ref, at=start, limit=end)
            for block in _blocks(gw, reads, start, end, _read_block(gw, reads, start, end)):
                out.write(block)
        return staged, attr
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staged)
        raise


def _copy_preconditions(req: Request, attr: Attr) -> None:
    etag = quoted_etag(attr).strip('"')
    match = req.headers.get("x-amz-copy-source-if-match")
    none_match = req.headers.get("x-amz-copy-source-if-none-match")
    if (match is not None and not _etag_matches(match, etag)) or (
        none_match is not None and _etag_matches(none_match, etag)
    ):
        raise S3Error(
            "PreconditionFailed",
            412,
            "At least one of the pre-conditions you specified did not hold",
            resource=req.resource,
        )


def copy_object(gw: Gateway, req: Request) -> Response:
    handle = gw.buckets.handle(req.bucket)
    path = parse_key(req.key, bucket=req.bucket)
    if path.is_dir_marker:
        handle.makedirs(path.parts)
        return xml_response(render("CopyObjectResult", [("ETag", f'"{EMPTY_ETAG}"')]))
    handle.check_target(path.parts, exclusive=False)
    staged, _ = stage_copy(gw, req)
    attr = commit_staged(handle, path, staged, req.resource)
    return xml_response(
        render(
            "CopyObjectResult",
            [("LastModified", iso_date(attr.mtime_ns)), ("ETag", quoted_etag(attr))],
        )
    )
