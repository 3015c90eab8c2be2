"""What each S3 client does with what CloudFS's data path relies on, asked of a live origin.

Why: speed alone does not pick a client. A block fetch is a ranged GET conditioned
on the ETag the cache holds (If-Match), and the cache must tell "gone" (404) from
"changed" (412) from anything else. Each check returns one line: what came back,
or the exception's type and message, so the report can quote it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

from bench.getclients import (
    ArrowClient,
    Boto3Client,
    Client,
    CrtClient,
    DirectClient,
    ObstoreClient,
)

PROBE_KEY = "small/000000.bin"
MISSING_KEY = "no/such/key.bin"
WRONG_ETAG = "0123456789abcdef0123456789abcdef"


def _boto3(c: Boto3Client, key: str, etag: str | None) -> Any:
    extra: dict[str, Any] = {"IfMatch": f'"{etag}"'} if etag else {}
    return c.s3.get_object(Bucket=c.bucket, Key=key, Range="bytes=10-19", **extra)["Body"].read()


def _direct(c: DirectClient, key: str, etag: str | None) -> Any:
    return c.store.get_range(key, 10, 10, etag=etag)


def _obstore(c: ObstoreClient, key: str, etag: str | None) -> Any:
    import obstore  # type: ignore[import-untyped,import-not-found,unused-ignore]

    options: Any = {"range": (10, 20)}  # a GetOptions
    if etag:
        options["if_match"] = f'"{etag}"'
    return obstore.get(c.store, key, options=options).bytes()


def _crt(c: CrtClient, key: str, etag: str | None) -> Any:
    from awscrt.http import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
        HttpHeaders,
        HttpRequest,
    )
    from awscrt.s3 import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
        S3RequestType,
    )

    headers = [("Host", c.host), ("Range", "bytes=10-19")]
    if etag:
        headers.append(("If-Match", f'"{etag}"'))
    request = HttpRequest("GET", f"/{c.bucket}/{key}", HttpHeaders(headers))
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        path = os.path.join(d, "body")
        s3req = c.s3.make_request(
            type=S3RequestType.GET_OBJECT, request=request, recv_filepath=path
        )
        s3req.finished_future.result(30)
        with open(path, "rb") as f:
            return f.read()


def _arrow(c: ArrowClient, key: str, etag: str | None) -> Any:
    if etag:
        raise NotImplementedError("S3FileSystem has no If-Match (no per-request headers)")
    with c.fs.open_input_file(f"{c.bucket}/{key}") as f:
        return f.read_at(10, 10)


GETS: dict[type[Client], Callable[[Any, str, str | None], Any]] = {
    Boto3Client: _boto3,
    DirectClient: _direct,
    ObstoreClient: _obstore,
    CrtClient: _crt,
    ArrowClient: _arrow,
}


def _describe(err: BaseException) -> str:
    kind = type(err)
    name = f"{kind.__module__}.{kind.__qualname__}"
    status = getattr(err, "status_code", None) or getattr(err, "response", {}).get(
        "ResponseMetadata", {}
    ).get("HTTPStatusCode")
    text = " ".join(str(err).split())[:160]
    return f"raises {name}" + (f" (status {status})" if status else "") + f": {text}"


def _outcome(get: Callable[[], Any]) -> str:
    try:
        data = get()
    except Exception as err:
        return _describe(err)
    return f"returns {memoryview(data).nbytes} bytes"


def probe(client: Client, etag: str) -> dict[str, str]:
    """Ranged GET: plain, If-Match right, If-Match wrong, a missing key."""
    get = GETS[type(client)]
    return {
        "range": _outcome(lambda: get(client, PROBE_KEY, None)),
        "if_match_right": _outcome(lambda: get(client, PROBE_KEY, etag)),
        "if_match_wrong": _outcome(lambda: get(client, PROBE_KEY, WRONG_ETAG)),
        "missing_key": _outcome(lambda: get(client, MISSING_KEY, None)),
    }
