"""What a SigV4 request says it signed, and the checks of it that need no secret.

``claim_from_header`` reads the ``Authorization`` header (with ``X-Amz-Date`` or
``Date``, and ``x-amz-content-sha256``), ``claim_from_query`` a presigned URL's
``X-Amz-*`` parameters, each into a ``Claim``: the access key, the credential
scope's date and region, the signed header names, the signature, the signed time
and what the signature says of the payload. A claim that cannot be read is S3's
own error (``AuthorizationHeaderMalformed``, ``AuthorizationQueryParametersError``,
``InvalidRequest``...). ``check_clock``, ``check_expiry`` and
``check_amz_headers_signed`` refuse a request by its time or its unsigned
``x-amz-*`` headers. Whether the signature itself holds is ``sigv4.authenticate``'s
to say, from the claim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Protocol
from urllib.parse import unquote

from cloudfs.gateway.errors import S3Error

ALGORITHM = "AWS4-HMAC-SHA256"
# What x-amz-content-sha256 may say besides a hex SHA-256 of the body:
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
STREAMING_MODES = frozenset(
    {STREAMING_SIGNED, STREAMING_SIGNED_TRAILER, STREAMING_UNSIGNED_TRAILER}
)

MAX_SKEW_S = 15 * 60  # S3's tolerance between the client's clock and ours
MAX_EXPIRES_S = 7 * 24 * 3600  # the longest life S3 allows a presigned URL

_HEX64 = re.compile(r"[0-9a-f]{64}")
_AMZ_DATE = re.compile(r"\d{8}T\d{6}Z")


@dataclass(frozen=True)
class Claim:
    """What the client says it signed, from the header or the query."""

    access_key: str
    date: str  # yyyymmdd of the scope
    region: str
    signed_headers: list[str]
    signature: str
    amz_date: str
    payload: str


def sigv2_refused(resource: str) -> S3Error:
    """S3's answer to a Signature Version 2 request (``AWS`` header, ``Signature`` query)."""
    return S3Error(
        "InvalidRequest",
        400,
        "Signature Version 2 is not supported; use SigV4 (AWS4-HMAC-SHA256)",
        resource=resource,
    )


def claim_from_header(authorization: str, found: dict[str, list[str]], resource: str) -> Claim:
    def malformed(message: str) -> S3Error:
        return S3Error("AuthorizationHeaderMalformed", 400, message, resource=resource)

    algorithm, _, rest = authorization.partition(" ")
    if algorithm == "AWS":
        raise sigv2_refused(resource)
    if algorithm != ALGORITHM:
        raise S3Error(
            "InvalidRequest",
            400,
            f"Unsupported authorization type {algorithm!r}; use AWS4-HMAC-SHA256 (SigV4)",
            resource=resource,
        )
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, equals, value = part.strip().partition("=")
        if equals:
            fields[name] = value.strip()
    for name in ("Credential", "SignedHeaders", "Signature"):
        if not fields.get(name):
            raise malformed(f"The authorization header is malformed; {name} is missing.")
    access_key, date, region = _credential(fields["Credential"], malformed)
    amz_date = _header_date(found, malformed)
    if amz_date[:8] != date:
        raise malformed(
            f"The authorization header is malformed; Invalid credential date. "
            f"Date is not the same as X-Amz-Date: {date}."
        )
    payloads = found.get("x-amz-content-sha256")
    if not payloads:
        raise S3Error(
            "InvalidRequest",
            400,
            "Missing required header for this request: x-amz-content-sha256",
            resource=resource,
        )
    payload = payloads[0].strip()
    known = payload in STREAMING_MODES or payload == UNSIGNED_PAYLOAD
    if not known and not _HEX64.fullmatch(payload.lower()):
        raise S3Error(
            "InvalidArgument",
            400,
            "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-"
            "PAYLOAD(-TRAILER), STREAMING-UNSIGNED-PAYLOAD-TRAILER or a hex SHA-256",
            resource=resource,
        )
    return Claim(
        access_key=access_key,
        date=date,
        region=region,
        signed_headers=_signed_headers(fields["SignedHeaders"]),
        signature=fields["Signature"].lower(),
        amz_date=amz_date,
        payload=payload,
    )


def claim_from_query(raw_query: str, resource: str) -> Claim:
    def malformed(message: str) -> S3Error:
        return S3Error("AuthorizationQueryParametersError", 400, message, resource=resource)

    values: dict[str, str] = {}
    for item in raw_query.split("&"):
        name, _, value = item.partition("=")
        values.setdefault(unquote(name), unquote(value))
    required = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires")
    for name in (*required, "X-Amz-SignedHeaders", "X-Amz-Signature"):
        if not values.get(name):
            raise malformed(
                "Query-string authentication version 4 requires the X-Amz-Algorithm, "
                "X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, "
                "and X-Amz-Expires parameters."
            )
    if values["X-Amz-Algorithm"] != ALGORITHM:
        raise malformed('X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"')
    access_key, date, region = _credential(values["X-Amz-Credential"], malformed)
    amz_date = values["X-Amz-Date"]
    if not _AMZ_DATE.fullmatch(amz_date):
        raise malformed("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
    if amz_date[:8] != date:
        raise malformed("Invalid credential date. Date is not the same as X-Amz-Date.")
    return Claim(
        access_key=access_key,
        date=date,
        region=region,
        signed_headers=_signed_headers(values["X-Amz-SignedHeaders"]),
        signature=values["X-Amz-Signature"].lower(),
        amz_date=amz_date,
        payload=values.get("X-Amz-Content-Sha256", UNSIGNED_PAYLOAD),
    )


def _credential(credential: str, malformed: _Malformed) -> tuple[str, str, str]:
    """``AK/yyyymmdd/region/s3/aws4_request`` -> (AK, yyyymmdd, region); any region."""
    parts = credential.split("/")
    if len(parts) < 5 or not parts[0]:
        raise malformed(
            f"The authorization header is malformed; the Credential is mal-formed; "
            f'expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request": {credential}'
        )
    access_key = "/".join(parts[:-4])
    date, region, service, terminal = parts[-4:]
    if not re.fullmatch(r"\d{8}", date) or not region:
        raise malformed(f"Invalid credential date or region in {credential}")
    if service != "s3":
        raise malformed(
            f"The authorization header is malformed; incorrect service {service!r}. "
            'This endpoint belongs to "s3".'
        )
    if terminal != "aws4_request":
        raise malformed(
            f"The authorization header is malformed; incorrect terminal {terminal!r}. "
            'This endpoint uses "aws4_request".'
        )
    return access_key, date, region


class _Malformed(Protocol):
    def __call__(self, message: str) -> S3Error: ...


def _signed_headers(text: str) -> list[str]:
    return [name.strip().lower() for name in text.split(";") if name.strip()]


def _header_date(found: dict[str, list[str]], malformed: _Malformed) -> str:
    """The signed time as ``yyyymmddThhmmssZ``: from x-amz-date, else from Date."""
    amz = (found.get("x-amz-date") or [""])[0].strip()
    if amz:
        if not _AMZ_DATE.fullmatch(amz):
            raise malformed(f"X-Amz-Date {amz!r} is not yyyymmddThhmmssZ")
        return amz
    date = (found.get("date") or [""])[0].strip()
    if not date:
        raise S3Error(
            "AccessDenied", 403, "AWS authentication requires a valid Date or x-amz-date header"
        )
    try:
        parsed = parsedate_to_datetime(date)
    except (TypeError, ValueError) as error:
        raise S3Error(
            "AccessDenied", 403, "AWS authentication requires a valid Date or x-amz-date header"
        ) from error
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _timestamp(amz_date: str) -> float:
    parsed = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
    return parsed.replace(tzinfo=timezone.utc).timestamp()


def check_clock(amz_date: str, now: float, resource: str) -> None:
    try:
        when = _timestamp(amz_date)
    except ValueError as error:
        raise S3Error(
            "AccessDenied", 403, f"Invalid date {amz_date!r}", resource=resource
        ) from error
    if abs(now - when) > MAX_SKEW_S:
        raise S3Error(
            "RequestTimeTooSkewed",
            403,
            "The difference between the request time and the current time is too large.",
            resource=resource,
        )


def check_expiry(amz_date: str, raw_query: str, now: float, resource: str) -> None:
    expires = ""
    for item in raw_query.split("&"):
        name, _, value = item.partition("=")
        if unquote(name) == "X-Amz-Expires":
            expires = unquote(value)
            break
    if not (expires.isascii() and expires.isdigit()):
        raise S3Error(
            "AuthorizationQueryParametersError",
            400,
            "X-Amz-Expires should be a number",
            resource=resource,
        )
    if int(expires) > MAX_EXPIRES_S:
        raise S3Error(
            "AuthorizationQueryParametersError",
            400,
            "X-Amz-Expires must be less than a week (in seconds) that is 604800",
            resource=resource,
        )
    try:
        when = _timestamp(amz_date)
    except ValueError as error:
        raise S3Error(
            "AuthorizationQueryParametersError", 400, "Invalid X-Amz-Date", resource=resource
        ) from error
    if when - now > MAX_SKEW_S:
        raise S3Error("AccessDenied", 403, "Request is not valid yet", resource=resource)
    if now > when + int(expires):
        raise S3Error("AccessDenied", 403, "Request has expired", resource=resource)


def check_amz_headers_signed(
    found: dict[str, list[str]], signed_headers: list[str], resource: str
) -> None:
    """S3 refuses x-amz-* headers the signature does not cover: they could be added in
    flight (metadata, copy sources, ACLs) without breaking the signature."""
    unsigned = sorted(
        name for name in found if name.startswith("x-amz-") and name not in signed_headers
    )
    if unsigned:
        raise S3Error(
            "AccessDenied",
            403,
            "There were headers present in the request which were not signed: "
            + ", ".join(unsigned),
            resource=resource,
        )
