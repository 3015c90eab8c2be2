"""Routing: which S3 operation a request is, from its method, bucket, key and query.

S3 names its operations by sub-resource parameters (``?uploads``,
``?delete``, ``?list-type=2``...) rather than by path, so the table is
explicit. A sub-resource the gateway does not serve (ACLs, tagging,
lifecycle...) is ``NotImplemented`` 501 rather than silently treated as the
plain call: a client that asks for a bucket policy must not get a listing.
"""

from __future__ import annotations

from collections.abc import Callable

from cloudfs.gateway import listing, multipart, objects
from cloudfs.gateway.context import Gateway
from cloudfs.gateway.errors import S3Error
from cloudfs.gateway.exchange import Request, Response

Operation = Callable[[Gateway, Request], Response]

# Sub-resources that change what a request means; any other query parameter is an argument.
_UNSERVED = frozenset(
    {
        "acl",
        "tagging",
        "policy",
        "lifecycle",
        "cors",
        "website",
        "logging",
        "notification",
        "replication",
        "encryption",
        "object-lock",
        "retention",
        "legal-hold",
        "torrent",
        "requestPayment",
        "accelerate",
        "analytics",
        "inventory",
        "metrics",
        "ownershipControls",
        "publicAccessBlock",
        "intelligent-tiering",
        "restore",
        "select",
        "attributes",
        "versions",
    }
)


def route(req: Request) -> tuple[str, Operation]:
    """(operation name, for metrics; the function that carries it out)."""
    q = req.query
    unserved = _UNSERVED.intersection(q)
    if unserved:
        name = sorted(unserved)[0]
        return "Unsupported", _not_implemented(f"the ?{name} sub-resource is not served by CloudFS")
    method = req.method
    if not req.bucket:
        if method == "GET":
            return "ListBuckets", listing.list_buckets
        return "Unsupported", _not_implemented("only GET (ListBuckets) is served at /")
    if not req.key:
        return _bucket_route(method, q)
    return _object_route(method, q, req)


def _bucket_route(method: str, q: dict[str, str]) -> tuple[str, Operation]:
    if method == "GET":
        if "location" in q:
            return "GetBucketLocation", listing.bucket_location
        if "versioning" in q:
            return "GetBucketVersioning", listing.bucket_versioning
        if "uploads" in q:
            return "ListMultipartUploads", multipart.list_uploads
        if q.get("list-type") == "2":
            return "ListObjectsV2", listing.list_objects_v2
        return "ListObjects", listing.list_objects_v1
    if method == "HEAD":
        return "HeadBucket", listing.head_bucket
    if method == "POST" and "delete" in q:
        return "DeleteObjects", objects.delete_objects
    if method in ("PUT", "DELETE"):
        return "CreateBucket" if method == "PUT" else "DeleteBucket", listing.refuse_bucket_change
    return "Unsupported", _not_implemented(f"{method} on a bucket is not served")


def _object_route(method: str, q: dict[str, str], req: Request) -> tuple[str, Operation]:
    if method == "GET":
        if "uploadId" in q:
            return "ListParts", multipart.list_parts
        return "GetObject", objects.get_object
    if method == "HEAD":
        return "HeadObject", lambda gw, r: objects.get_object(gw, r, head=True)
    if method == "PUT":
        if "partNumber" in q and "uploadId" in q:
            copy = "x-amz-copy-source" in req.headers
            return ("UploadPartCopy" if copy else "UploadPart"), multipart.upload_part
        if "x-amz-copy-source" in req.headers:
            return "CopyObject", objects.copy_object
        return "PutObject", objects.put_object
    if method == "POST":
        if "uploads" in q:
            return "CreateMultipartUpload", multipart.create
        if "uploadId" in q:
            return "CompleteMultipartUpload", multipart.complete
    if method == "DELETE":
        if "uploadId" in q:
            return "AbortMultipartUpload", multipart.abort
        return "DeleteObject", objects.delete_object
    return "Unsupported", _not_implemented(f"{method} on an object is not served")


def _not_implemented(message: str) -> Operation:
    def refuse(gw: Gateway, req: Request) -> Response:
        raise S3Error("NotImplemented", 501, message, resource=req.resource)

    return refuse
