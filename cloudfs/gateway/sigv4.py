"""AWS Signature Version 4, server side: who sent this S3 request, and did they sign it.

The gateway recomputes the signature a client made (botocore, the AWS CLI, the
AWS C++ SDK under pyarrow, the Java SDKs under Spark's s3a) from the request as
received and compares it with ``hmac.compare_digest``. Both ways of signing are
accepted: the ``Authorization`` header and presigned URLs (``X-Amz-*`` query).

What the signature covers of the body is only announced here (``Signed.payload``:
a hex SHA-256, ``UNSIGNED-PAYLOAD`` or a ``STREAMING-*`` mode); the body itself is
checked as it is read, by :func:`cloudfs.gateway.payload.open_body`, which needs
the signing key, scope, date and seed signature carried in :class:`Signed` to
verify aws-chunked chunk signatures.

S3 canonicalisation differs from other services: the path is signed as sent,
encoded once and never normalised (``//``, ``.`` stay). SDKs all send the path
already encoded the way they sign it, so the raw path is tried first; a client
that sends a character raw which it encoded when signing (``=``, ``@``, ``!``)
still verifies through a second candidate, the decoded path re-encoded by
S3's rules. Both candidates name the same key, so accepting either is safe.

What the request claims it signed (access key, scope, signed headers, time,
payload) is read, and its time checked, by :mod:`cloudfs.gateway.sigv4_claims`;
this module holds the keys, the canonical request and the signing.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Protocol
from urllib.parse import quote, unquote, unquote_plus

from cloudfs.errors import UsageError
from cloudfs.gateway.errors import S3Error
from cloudfs.gateway.sigv4_claims import (
    ALGORITHM,
    check_amz_headers_signed,
    check_clock,
    check_expiry,
    claim_from_header,
    claim_from_query,
    sigv2_refused,
)

log = logging.getLogger(__name__)

Keys = Mapping[str, str]  # access key id -> secret access key

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

ACCESS_KEY_ENV = "CLOUDFS_GATEWAY_ACCESS_KEY"
SECRET_KEY_ENV = "CLOUDFS_GATEWAY_SECRET_KEY"


class HeaderItems(Protocol):
    """What the server may pass as headers: a dict or http.server's message object.

    Only ``items()`` is used, because it is the one accessor both have that also
    yields a header sent twice twice (SigV4 signs repeated values joined by ``,``).
    """

    def items(self) -> Iterable[tuple[str, str]]: ...


@dataclass(frozen=True)
class Signed:
    """A request whose signature verified: who sent it, and how to check its body.

    ``payload`` is the ``x-amz-content-sha256`` value the signature covers (a hex
    SHA-256, ``UNSIGNED-PAYLOAD`` or one of the ``STREAMING-*`` modes). The rest is
    what aws-chunked chunk and trailer signatures chain from.
    """

    access_key: str
    payload: str
    amz_date: str = ""  # yyyymmddThhmmssZ, as signed
    scope: str = ""  # yyyymmdd/region/s3/aws4_request
    seed_signature: str = ""  # the request's own signature: chunk 1 chains from it
    signing_key: bytes = field(default=b"", repr=False)
    presigned: bool = False


# -- keys ---------------------------------------------------------------------


def load_keys(path: str | None, *, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The gateway's access keys: from ``path`` or, without one, from the environment.

    The file holds ``ACCESS_KEY_ID SECRET_ACCESS_KEY`` lines (``#`` comments and
    blank lines allowed). A file others can read only draws a warning, not a
    refusal, because Kubernetes mounts secrets 0644 by default.
    """
    if path is None:
        return _keys_from_environment(os.environ if environ is None else environ)
    try:
        with open(path, encoding="utf-8") as file:
            mode = os.fstat(file.fileno()).st_mode
            text = file.read()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read the gateway keys file {path}: {error}") from error
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("gateway keys file %s is readable by group/others; chmod 600 it", path)
    keys: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2:
            raise UsageError(f"{path} line {number}: expected 'ACCESS_KEY_ID SECRET_ACCESS_KEY'")
        if words[0] in keys:
            raise UsageError(f"{path} line {number}: access key {words[0]} given twice")
        keys[words[0]] = words[1]
    if not keys:
        raise UsageError(f"the gateway keys file {path} holds no key")
    return keys


def _keys_from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    access, secret = environ.get(ACCESS_KEY_ENV, ""), environ.get(SECRET_KEY_ENV, "")
    if access and secret:
        return {access: secret}
    if access or secret:
        raise UsageError(f"set both {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}, or neither")
    raise UsageError(
        f"the S3 gateway needs a key: a keys file, or {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}"
    )


# -- signing primitives (also what chunk signatures use) ------------------------


def signing_key(secret: str, date: str, region: str, service: str = "s3") -> bytes:
    """The key SigV4 derives per day, region and service from the secret."""
    key = _hmac(("AWS4" + secret).encode(), date)
    key = _hmac(key, region)
    key = _hmac(key, service)
    return _hmac(key, "aws4_request")


def sign(key: bytes, string_to_sign: str) -> str:
    return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


def chunk_signature(signed: Signed, previous: str, chunk_sha256: str) -> str:
    """The signature of one aws-chunked chunk, chained from the one before it."""
    return sign(
        signed.signing_key,
        "\n".join(
            [
                "AWS4-HMAC-SHA256-PAYLOAD",
                signed.amz_date,
                signed.scope,
                previous,
                EMPTY_SHA256,
                chunk_sha256,
            ]
        ),
    )


def trailer_signature(signed: Signed, previous: str, canonical_trailer: bytes) -> str:
    """The signature of the trailing headers, chained from the final (empty) chunk's."""
    return sign(
        signed.signing_key,
        "\n".join(
            [
                "AWS4-HMAC-SHA256-TRAILER",
                signed.amz_date,
                signed.scope,
                previous,
                hashlib.sha256(canonical_trailer).hexdigest(),
            ]
        ),
    )


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def uri_encode(text: str, *, keep_slash: bool) -> str:
    """SigV4's URI encoding: everything but RFC 3986 unreserved characters, as %XX."""
    return quote(text, safe="-_.~/" if keep_slash else "-_.~")


# -- request canonicalisation ---------------------------------------------------


def header_lists(headers: HeaderItems) -> dict[str, list[str]]:
    """Header values by lower-case name, in arrival order (names are case-insensitive)."""
    found: dict[str, list[str]] = {}
    for name, value in headers.items():
        found.setdefault(name.lower(), []).append(str(value))
    return found


def _canonical_query(raw_query: str, *, drop: str | None = None) -> str:
    pairs = []
    for item in raw_query.split("&"):
        if not item:
            continue
        name, _, value = item.partition("=")
        # '+' is a space, as the server reads the query (``parse_qsl``): botocore's
        # ``params=`` sends spaces so and signs them as %20.
        name, value = unquote_plus(name), unquote_plus(value)
        if name == drop:
            continue
        pairs.append((uri_encode(name, keep_slash=False), uri_encode(value, keep_slash=False)))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def _canonical_paths(raw_path: str) -> list[str]:
    """The raw path as signed by SDKs, then S3's own encoding of the decoded path."""
    raw = raw_path or "/"
    again = uri_encode(unquote(raw), keep_slash=True)
    return [raw] if again == raw else [raw, again]


def _canonical_headers(found: dict[str, list[str]], signed_headers: list[str]) -> str:
    lines = []
    for name in signed_headers:
        values = (" ".join(value.split()) for value in found.get(name, []))
        lines.append(f"{name}:{','.join(values)}\n")
    return "".join(lines)


# -- authenticate ---------------------------------------------------------------


def authenticate(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: HeaderItems,
    keys: Keys,
    *,
    now: float | None = None,
) -> Signed:
    """Verify the request's SigV4 signature; raise S3's own error when it does not hold.

    ``raw_path`` and ``raw_query`` exactly as on the request line (still
    percent-encoded): the signature covers the encoded form.
    """
    resource = unquote(raw_path)
    found = header_lists(headers)
    params = _query_names(raw_query)
    authorization = (found.get("authorization") or [""])[0].strip()
    current = datetime.now(timezone.utc).timestamp() if now is None else now
    if authorization and ("X-Amz-Algorithm" in params or "X-Amz-Signature" in params):
        raise S3Error(
            "InvalidArgument",
            400,
            "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, "
            "Signature query string parameter or the Authorization header should be specified",
            resource=resource,
        )
    if authorization:
        claim = claim_from_header(authorization, found, resource)
        check_clock(claim.amz_date, current, resource)
        check_amz_headers_signed(found, claim.signed_headers, resource)
        presigned = False
    elif "X-Amz-Algorithm" in params or "X-Amz-Credential" in params:
        claim = claim_from_query(raw_query, resource)
        check_expiry(claim.amz_date, raw_query, current, resource)
        presigned = True
    elif "AWSAccessKeyId" in params or "Signature" in params:
        raise sigv2_refused(resource)
    else:
        raise S3Error("AccessDenied", 403, "Access Denied", resource=resource)
    if "host" not in claim.signed_headers:
        raise S3Error(
            "AuthorizationHeaderMalformed"
            if not presigned
            else "AuthorizationQueryParametersError",
            400,
            "The host header must be signed",
            resource=resource,
        )
    secret = keys.get(claim.access_key)
    if secret is None:
        raise S3Error(
            "InvalidAccessKeyId",
            403,
            "The AWS Access Key Id you provided does not exist in our records.",
            resource=resource,
        )
    key = signing_key(secret, claim.date, claim.region)
    scope = f"{claim.date}/{claim.region}/s3/aws4_request"
    headers_part = _canonical_headers(found, claim.signed_headers)
    raw_sorted = _raw_sorted_query(raw_query, presigned)
    queries = [_canonical_query(raw_query, drop="X-Amz-Signature" if presigned else None)]
    if raw_sorted != queries[0]:
        queries.append(raw_sorted)
    for path, query in ((p, q) for p in _canonical_paths(raw_path) for q in queries):
        canonical_request = "\n".join(
            [
                method.upper(),
                path,
                query,
                headers_part,
                ";".join(claim.signed_headers),
                claim.payload,
            ]
        )
        string_to_sign = "\n".join(
            [
                ALGORITHM,
                claim.amz_date,
                scope,
                hashlib.sha256(canonical_request.encode()).hexdigest(),
            ]
        )
        expected = sign(key, string_to_sign)
        if hmac.compare_digest(expected, claim.signature):
            return Signed(
                access_key=claim.access_key,
                payload=claim.payload,
                amz_date=claim.amz_date,
                scope=scope,
                seed_signature=expected,
                signing_key=key,
                presigned=presigned,
            )
        log.debug("SigV4 mismatch; canonical request:\n%s", canonical_request)
    raise S3Error(
        "SignatureDoesNotMatch",
        403,
        "The request signature we calculated does not match the signature you provided. "
        "Check your key and signing method.",
        resource=resource,
    )


def _raw_sorted_query(raw_query: str, presigned: bool) -> str:
    """botocore's own form: the query's pairs as sent, sorted, not re-encoded."""
    pairs = [item.partition("=") for item in raw_query.split("&") if item]
    kept = [(n, v) for n, _, v in pairs if not (presigned and unquote(n) == "X-Amz-Signature")]
    return "&".join(f"{n}={v}" for n, v in sorted(kept))


def _query_names(raw_query: str) -> set[str]:
    # S3's query parameter names are case-sensitive: ``x-amz-signature`` is an
    # ordinary parameter, not the presigned URL's, and ``claim_from_query``
    # reads the exact names.
    return {unquote(item.partition("=")[0]) for item in raw_query.split("&") if item}
