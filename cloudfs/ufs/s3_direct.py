"""``DirectGet``: ranged GETs that skip botocore's request pipeline on the happy path.

A block fetch is one ranged GetObject. Through ``client.get_object`` it costs
about 1.4 ms of CPU on top of the transfer (parameter validation, a dozen event
hooks, response parsing), twice what signing and sending the request costs: on
a 2-core node that is a fifth of the mount's CPU per small file when a job's
prefetch runs at the origin's rate (benchmarks/RESULTS-epochs.md).

``DirectGet`` signs the GET with the client's own credentials and region
(SigV4, as botocore does) and sends it through the client's own HTTP session,
so proxies, TLS verification, the connection pool and the timeouts are the
client's. It only ever answers a 200 or 206 with the whole body; for anything
else (an error status, a short body, a transport failure) it returns ``None``
and the caller makes the request through botocore, which owns retries, back-off
and error translation. An answer that says the request itself is wrong for
this endpoint (a redirect, 400, 403, 405) turns the direct path off for the
store's life: the endpoint wants something botocore knows and this does not
(another region, S3 Express sessions, an access policy). A transport failure
makes the worst case one try more than ``S3Config.max_attempts``.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import BotoCoreError

if TYPE_CHECKING:
    from botocore.credentials import Credentials
    from mypy_boto3_s3 import S3Client

log = logging.getLogger(__name__)
T = TypeVar("T")

# Statuses after which the same request may well succeed through botocore
# (a missing key, a range past the end, a busy or failing server): fall back
# for this request only. Any other non-2xx turns the direct path off.
# Answers botocore handles (retries, errors) without the direct path being wrong for
# the endpoint: 412 is a conditional GET's If-Match that failed (ObjectChanged).
TRANSIENT = frozenset({404, 408, 412, 416, 429, 500, 502, 503, 504})


class Body(NamedTuple):
    data: bytes
    partial: bool  # the server honoured Range (206); False: the whole object (200)


class HttpSession(Protocol):
    """What DirectGet needs of botocore's URLLib3Session."""

    def send(self, request: Any) -> Any: ...


class SignedPath:
    """What DirectGet and DirectList share: requests signed with the client's credentials
    and region (SigV4), sent through its HTTP session, counted, and the path turned off
    for the store's life by an answer that says it is wrong for the endpoint."""

    what = "request"  # for the log: "a direct GET"

    def __init__(self, http: HttpSession, credentials: Credentials, region: str) -> None:
        self.http = http
        self.credentials = credentials
        self.region = region
        self._lock = threading.Lock()
        self.enabled = True
        self.served = 0  # requests answered here
        self.fell_back = 0  # requests handed back to botocore

    def _signed_send(self, request: AWSRequest) -> Any:
        """The answer to ``request``, signed now (the credentials may have rotated)."""
        S3SigV4Auth(self.credentials.get_frozen_credentials(), "s3", self.region).add_auth(request)
        return self.http.send(request.prepare())

    def _counted(self, answer: T | None) -> T | None:
        with self._lock:
            if answer is None:
                self.fell_back += 1
            else:
                self.served += 1
        return answer

    def _refused(self, status: int) -> None:
        """A non-2xx answer: turn the path off unless the same request may well succeed
        through botocore (``TRANSIENT``)."""
        if status in TRANSIENT:
            return
        with self._lock:
            was, self.enabled = self.enabled, False
        if was:
            log.info("S3 endpoint answered a direct %s with %d: using boto3", self.what, status)


class DirectGet(SignedPath):
    """Signed ranged GETs of one bucket, sent through the client's HTTP session."""

    what = "GET"

    def __init__(
        self,
        http: HttpSession,
        base_url: str,
        credentials: Credentials,
        region: str,
    ) -> None:
        super().__init__(http, credentials, region)
        self.base_url = base_url  # ends with "/": the key, quoted, follows

    @classmethod
    def for_client(
        cls, client: S3Client, bucket: str, credentials: Credentials | None
    ) -> DirectGet | None:
        """The direct path for ``bucket`` through ``client``, or None where it cannot be had.

        The object URL comes from botocore itself (a presigned URL of a probe key,
        stripped of the key and the query), so path or virtual-host addressing,
        custom endpoints and dotted bucket names are botocore's choice. The HTTP
        session is the client's endpoint's: a private attribute, so its absence
        (a botocore that moved it) just means no direct path.
        """
        endpoint = getattr(client, "_endpoint", None)
        http = getattr(endpoint, "http_session", None)
        region = client.meta.region_name
        if credentials is None or http is None or not hasattr(http, "send") or not region:
            return None
        try:
            probe = client.generate_presigned_url(
                "get_object", Params={"Bucket": bucket, "Key": "k"}, ExpiresIn=60
            )
        except BotoCoreError:
            return None
        scheme, netloc, path, _, _ = urlsplit(probe)
        if not path.endswith("/k"):
            return None
        return cls(http, urlunsplit((scheme, netloc, path[:-1], "", "")), credentials, region)

    def get(
        self, full_key: str, offset: int, length: int, if_match: str | None = None
    ) -> Body | None:
        """``length`` bytes at ``offset`` of ``full_key`` (of ETag ``if_match`` only, if
        given), or None: ask botocore instead."""
        if not self.enabled:
            return None
        return self._counted(self._send(full_key, offset, length, if_match))

    def _send(self, full_key: str, offset: int, length: int, if_match: str | None) -> Body | None:
        headers = {"Range": f"bytes={offset}-{offset + length - 1}"}
        if if_match:
            headers["If-Match"] = f'"{if_match}"'
        request = AWSRequest(
            method="GET", url=self.base_url + quote(full_key, safe="/~"), headers=headers
        )
        try:
            response = self._signed_send(request)
            status = response.status_code
            data = response.content if status in (200, 206) else b""
        except Exception as err:  # any transport failure: botocore retries it
            log.debug("direct GET of %r failed (%s): falling back", full_key, err)
            return None
        if status not in (200, 206):
            self._refused(status)
            return None
        declared = response.headers.get("content-length")
        if declared is not None and int(declared) != len(data):
            return None
        if status == 206 and "content-range" not in response.headers:
            return None
        return Body(data, partial=status == 206)
