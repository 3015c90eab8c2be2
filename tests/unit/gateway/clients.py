"""What real S3 clients send, for the gateway's SigV4 tests: botocore signs, we check.

Requests come from botocore itself (``S3SigV4Auth``/``S3SigV4QueryAuth`` on an
``AWSRequest``, or a whole boto3 client whose send is intercepted), so the tests
hold the server to the client's canonicalisation rather than to our own reading
of the spec. aws-chunked bodies are framed here as the SDKs frame them.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.config import Config
from botocore.credentials import Credentials

from cloudfs.gateway.sigv4 import Signed, chunk_signature, trailer_signature

ACCESS_KEY = "AKIDCLOUDFSTEST"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYSECRET/KEY"
KEYS = {ACCESS_KEY: SECRET_KEY, "AKIDOTHER": "another-secret"}


@dataclass(frozen=True)
class Wire:
    """One request as the gateway's HTTP server would see it."""

    method: str
    path: str
    query: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def header(self, name: str, value: str | None) -> Wire:
        """A copy with header ``name`` set to ``value`` (None: removed)."""
        headers = {k: v for k, v in self.headers.items() if k.lower() != name.lower()}
        if value is not None:
            headers[name] = value
        return replace(self, headers=headers)

    def get(self, name: str) -> str:
        return next(v for k, v in self.headers.items() if k.lower() == name.lower())


def _wire(method: str, url: str, headers: Any, body: bytes) -> Wire:
    parts = urlsplit(url)
    found = {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in headers.items()}
    found.setdefault("Host", parts.netloc)
    return Wire(method, parts.path, parts.query, found, body)


def botocore_signed(
    method: str,
    url: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    region: str = "us-east-1",
    access_key: str = ACCESS_KEY,
    secret: str = SECRET_KEY,
    presign: int | None = None,
    params: dict[str, str] | None = None,
) -> Wire:
    """``url`` (already encoded, as botocore's serializer makes it) signed by botocore."""
    request = AWSRequest(method=method, url=url, data=body, headers=headers or {}, params=params)
    credentials = Credentials(access_key, secret)
    if presign is None:
        S3SigV4Auth(credentials, "s3", region).add_auth(request)
    else:
        S3SigV4QueryAuth(credentials, "s3", region, expires=presign).add_auth(request)
    prepared = request.prepare()
    return _wire(prepared.method, prepared.url, prepared.headers, prepared.body or b"")


class _Drained:
    """A raw response body botocore can read: the capture answers every call 200."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        return iter([b""])


def sdk_requests(endpoint: str, call: str, **kwargs: Any) -> list[Wire]:
    """What a boto3 client sends for one API call, captured before it leaves."""
    sent: list[Wire] = []

    def capture(request: Any, **_: Any) -> AWSResponse:
        body = request.body
        if hasattr(body, "read"):
            body = body.read()
        sent.append(_wire(request.method, request.url, request.headers, body or b""))
        return AWSResponse(request.url, 200, {"ETag": '"0"'}, _Drained())

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name="us-east-1",
    )
    client.meta.events.register("before-send.s3", capture)
    getattr(client, call)(**kwargs)
    return sent


def presigned_url(url_kwargs: dict[str, Any], expires: int = 3600) -> Wire:
    """A URL from boto3's ``generate_presigned_url`` for get_object, as a GET."""
    client = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:9000",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name="eu-west-1",
        config=Config(signature_version="s3v4"),  # boto3 presigns SigV2 by default
    )
    url = client.generate_presigned_url("get_object", Params=url_kwargs, ExpiresIn=expires)
    return _wire("GET", url, {}, b"")


def crc32_b64(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def aws_chunked(
    data: bytes,
    chunk_size: int,
    *,
    signed: Signed | None = None,
    trailers: list[tuple[str, str]] | None = None,
    sign_trailer: bool = False,
) -> bytes:
    """Frame ``data`` as aws-chunked, as the SDKs do: signed chunks when ``signed``."""
    out = io.BytesIO()
    previous = signed.seed_signature if signed else ""
    pieces = [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)] + [b""]
    for piece in pieces:
        if signed is not None:
            previous = chunk_signature(signed, previous, hashlib.sha256(piece).hexdigest())
            out.write(f"{len(piece):x};chunk-signature={previous}\r\n".encode())
        else:
            out.write(f"{len(piece):x}\r\n".encode())
        if piece:
            out.write(piece + b"\r\n")
    for name, value in trailers or []:
        out.write(f"{name}:{value}\r\n".encode())
    if sign_trailer and signed is not None:
        canonical = "".join(f"{n}:{v}\n" for n, v in trailers or []).encode()
        signature = trailer_signature(signed, previous, canonical)
        out.write(f"x-amz-trailer-signature:{signature}\r\n".encode())
    out.write(b"\r\n")
    return out.getvalue()


class Trickle(io.RawIOBase):
    """A socket-like stream handing out at most ``step`` bytes a read, so chunk
    headers, data and CRLFs arrive split at every possible point."""

    def __init__(self, data: bytes, step: int) -> None:
        super().__init__()
        self._data = memoryview(data)
        self._step = step
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self._step, len(self._data) - self.consumed)
        buffer[:n] = self._data[self.consumed : self.consumed + n]
        self.consumed += n
        return n
