"""Stand-in: header-signed SigV4 (no presigned URLs), the interface of cloudfs.gateway.sigv4."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, unquote

from cloudfs.errors import UsageError
from cloudfs.gateway.errors import S3Error


class HeaderItems(Protocol):
    def items(self) -> Iterable[tuple[str, str]]: ...


@dataclass(frozen=True)
class Signed:
    access_key: str
    payload: str


def load_keys(path: str | None) -> dict[str, str]:
    if path:
        try:
            with open(path) as f:
                return dict(line.split() for line in f if line.strip())  # type: ignore[misc]
        except OSError as e:
            raise UsageError(f"cannot read keys file {path}: {e.strerror}") from None
    access = os.environ.get("CLOUDFS_GATEWAY_ACCESS_KEY")
    secret = os.environ.get("CLOUDFS_GATEWAY_SECRET_KEY")
    if not access or not secret:
        raise UsageError("no gateway keys")
    return {access: secret}


def _query(raw: str) -> str:
    pairs = []
    for item in raw.split("&") if raw else []:
        name, _, value = item.partition("=")
        pairs.append((quote(unquote(name), safe="-_.~"), quote(unquote(value), safe="-_.~")))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def authenticate(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Any,
    keys: Mapping[str, str],
    *,
    now: float | None = None,
) -> Signed:
    found: dict[str, list[str]] = {}
    for name, value in headers.items():
        found.setdefault(name.lower(), []).append(" ".join(str(value).split()))
    auth = ",".join(found.get("authorization", []))
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        raise S3Error("AccessDenied", 403, "Access Denied")
    fields = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 ") :].split(","))
    access, date, region, service, _ = fields["Credential"].split("/")
    secret = keys.get(access)
    if secret is None:
        raise S3Error(
            "InvalidAccessKeyId",
            403,
            "The AWS Access Key Id you provided does not exist in our records.",
        )
    signed_headers = fields["SignedHeaders"].split(";")
    payload = ",".join(found.get("x-amz-content-sha256", ["UNSIGNED-PAYLOAD"]))
    canonical = "\n".join(
        [
            method,
            raw_path,
            _query(raw_query),
            "".join(f"{h}:{','.join(found.get(h, []))}\n" for h in signed_headers),
            fields["SignedHeaders"],
            payload,
        ]
    )
    amz_date = ",".join(found.get("x-amz-date", []))
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = (
        f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    )
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, fields["Signature"]):
        raise S3Error(
            "SignatureDoesNotMatch",
            403,
            "The request signature we calculated does not match the signature you provided.",
        )
    return Signed(access, payload)
