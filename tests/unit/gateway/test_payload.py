"""Request bodies through ``open_body``: what botocore and the AWS documentation put on
the wire must decode to the client's bytes, and every corruption must be refused with
the error S3 itself gives, in the read that reaches the end of the body."""

from __future__ import annotations

import base64
import hashlib
import io
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO, cast

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.config import Config
from botocore.credentials import Credentials
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudfs.gateway.chunked import MAX_LINE
from cloudfs.gateway.errors import S3Error
from cloudfs.gateway.payload import READ_BUFFER, Body, open_body
from cloudfs.gateway.sigv4 import Signed, authenticate
from cloudfs.gateway.sigv4_claims import (
    STREAMING_SIGNED,
    STREAMING_SIGNED_TRAILER,
    STREAMING_UNSIGNED_TRAILER,
    UNSIGNED_PAYLOAD,
)
from tests.unit.gateway.clients import (
    ACCESS_KEY,
    KEYS,
    SECRET_KEY,
    Trickle,
    Wire,
    aws_chunked,
    botocore_signed,
    crc32_b64,
    sdk_requests,
)

ENDPOINT = "http://127.0.0.1:9000"
TLS_ENDPOINT = "https://127.0.0.1:9000"  # botocore streams put_object as aws-chunked over TLS
KIB = 1024
MIB = 1024 * KIB

# -- the AWS documentation's worked examples (sigv4-streaming, sigv4-streaming-trailers) --

AWS_KEYS = {"AKIAIOSFODNN7EXAMPLE": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
AWS_NOW = 1369353600.0  # 20130524T000000Z
AWS_DATA = b"a" * 66560  # 64 KiB + 1 KiB of 'a'
AWS_CREDENTIAL = "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"
AWS_HEADERS = {
    "Host": "s3.amazonaws.com",
    "x-amz-date": "20130524T000000Z",
    "x-amz-storage-class": "REDUCED_REDUNDANCY",
    "Content-Encoding": "aws-chunked",
    "x-amz-decoded-content-length": "66560",
}
AWS_SIGNED = {  # Example: PUT Object, STREAMING-AWS4-HMAC-SHA256-PAYLOAD
    **AWS_HEADERS,
    "x-amz-content-sha256": STREAMING_SIGNED,
    "Content-Length": "66824",
    "Authorization": (
        f"AWS4-HMAC-SHA256 Credential={AWS_CREDENTIAL},SignedHeaders=content-encoding;"
        "content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;"
        "x-amz-storage-class,Signature="
        "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
    ),
}
AWS_CHUNK_SIGNATURES = (
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
)
AWS_SIGNED_TRAILER = {  # the same PUT with an x-amz-checksum-crc32c trailer
    **AWS_HEADERS,
    "x-amz-content-sha256": STREAMING_SIGNED_TRAILER,
    "x-amz-trailer": "x-amz-checksum-crc32c",
    "Content-Length": "66946",
    "Authorization": (
        f"AWS4-HMAC-SHA256 Credential={AWS_CREDENTIAL},SignedHeaders=content-encoding;"
        "host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;"
        "x-amz-storage-class;x-amz-trailer,Signature="
        "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e"
    ),
}
AWS_TRAILER_CHUNK_SIGNATURES = (
    "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
    "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
    "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
)
AWS_TRAILER = b"x-amz-checksum-crc32c:sOO8/Q==\r\n"
AWS_TRAILER_SIGNATURE = "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435"


def aws_example_body(signatures: tuple[str, str, str], trailer: bytes = b"") -> bytes:
    """The body exactly as the documentation lays it out (64 KiB, 1 KiB, final chunk)."""
    return (
        f"10000;chunk-signature={signatures[0]}\r\n".encode()
        + AWS_DATA[: 64 * KIB]
        + b"\r\n"
        + f"400;chunk-signature={signatures[1]}\r\n".encode()
        + AWS_DATA[64 * KIB :]
        + b"\r\n"
        + f"0;chunk-signature={signatures[2]}\r\n".encode()
        + trailer
        + b"\r\n"
    )


AWS_BODY = aws_example_body(AWS_CHUNK_SIGNATURES)
AWS_TRAILER_BODY = aws_example_body(
    AWS_TRAILER_CHUNK_SIGNATURES,
    AWS_TRAILER + f"x-amz-trailer-signature:{AWS_TRAILER_SIGNATURE}\r\n".encode(),
)


def aws_signed(headers: dict[str, str]) -> Signed:
    return authenticate("PUT", "/examplebucket/chunkObject.txt", "", headers, AWS_KEYS, now=AWS_NOW)


# -- helpers ------------------------------------------------------------------------


def authenticated(wire: Wire) -> Signed:
    return authenticate(wire.method, wire.path, wire.query, wire.headers, KEYS)


def wire_length(wire: Wire) -> int | None:
    """What the server passes as content_length: the header, None once it has removed
    HTTP chunked transfer encoding (botocore's aws-chunked uploads over TLS)."""
    headers = {k.lower(): v for k, v in wire.headers.items()}
    if "chunked" in headers.get("transfer-encoding", ""):
        return None
    return int(headers.get("content-length", "0"))


def opened(
    wire: Wire,
    body: bytes | None = None,
    *,
    step: int | None = None,
    content_length: int | str | None = "header",
) -> Body:
    """``wire`` authenticated, then its body (or ``body``, as received instead) opened;
    ``step``: the stream arrives at most that many bytes a read."""
    data = wire.body if body is None else body
    stream: BinaryIO = io.BytesIO(data) if step is None else cast(BinaryIO, Trickle(data, step))
    length = wire_length(wire) if content_length == "header" else content_length
    assert not isinstance(length, str)
    return open_body(authenticated(wire), wire.headers, stream, length, resource="/b/k")


def read_all(body: Body, size: int = 64 * KIB) -> bytes:
    """The whole payload, read as the gateway does: bounded reads until EOF."""
    parts = []
    while data := body.read(size):
        assert len(data) <= size
        parts.append(data)
    assert body.read(size) == b""  # EOF stays EOF
    return b"".join(parts)


def refused(action: Callable[[], object], code: str, status: int) -> S3Error:
    with pytest.raises(S3Error) as caught:
        action()
    assert (caught.value.code, caught.value.status) == (code, status), caught.value
    return caught.value


def b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def sdk_put(body: bytes, *, endpoint: str = ENDPOINT, **kwargs: Any) -> Wire:
    (wire,) = sdk_requests(endpoint, "put_object", Bucket="b", Key="k", Body=body, **kwargs)
    return wire


def sdk_put_unsigned_payload(body: bytes) -> Wire:
    """boto3 with ``payload_signing_enabled=False``: UNSIGNED-PAYLOAD plus a CRC32 header."""
    sent: list[Wire] = []

    def capture(request: Any, **_: Any) -> AWSResponse:
        headers = {
            k: v.decode() if isinstance(v, bytes) else str(v) for k, v in request.headers.items()
        }
        headers.setdefault("Host", "127.0.0.1:9000")
        body = request.body.read() if hasattr(request.body, "read") else request.body
        sent.append(Wire(request.method, "/b/k", "", headers, body or b""))
        return AWSResponse(request.url, 200, HTTPHeaders.from_dict({"ETag": '"0"'}), _Drained())

    client = boto3.client(
        "s3",
        endpoint_url=ENDPOINT,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name="us-east-1",
        config=Config(s3={"payload_signing_enabled": False}),
    )
    client.meta.events.register("before-send.s3", cast(Callable[..., None], capture))
    client.put_object(Bucket="b", Key="k", Body=body)
    (wire,) = sent
    return wire


class _Drained:
    def stream(self, **_: Any) -> Any:
        return iter([b""])


def streaming_wire(
    mode: str,
    decoded_length: int,
    *,
    trailer: str | None = None,
) -> Wire:
    """A request announcing an aws-chunked body in ``mode``, signed by botocore.

    botocore's S3 signer only ever sends STREAMING-UNSIGNED-PAYLOAD-TRAILER itself (it
    overwrites any preset x-amz-content-sha256), so the signed streaming modes the Java,
    Go and C++ SDKs send are signed here by botocore's generic SigV4 signer, which signs
    a preset x-amz-content-sha256 as given. The body is framed by the caller.
    """
    headers = {
        "X-Amz-Content-SHA256": mode,
        "Content-Encoding": "aws-chunked",
        "X-Amz-Decoded-Content-Length": str(decoded_length),
        "Host": "127.0.0.1:9000",
    }
    if trailer:
        headers["X-Amz-Trailer"] = trailer
    request = AWSRequest(method="PUT", url=f"{ENDPOINT}/b/k", headers=headers)
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1").add_auth(request)
    signed = {k: str(v) for k, v in request.headers.items()}
    return Wire("PUT", "/b/k", "", signed)


def framed(
    wire: Wire, data: bytes, chunk_size: int, trailers: list[tuple[str, str]] | None = None
) -> Wire:
    """``wire`` carrying ``data`` as aws-chunked in the wire's own mode."""
    signed = authenticated(wire)
    body = aws_chunked(
        data,
        chunk_size,
        signed=None if signed.payload == STREAMING_UNSIGNED_TRAILER else signed,
        trailers=trailers,
        sign_trailer=signed.payload == STREAMING_SIGNED_TRAILER,
    )
    return Wire(
        wire.method, wire.path, wire.query, {**wire.headers, "Content-Length": str(len(body))}, body
    )


# -- hex SHA-256 (the body signed whole) --------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 100, 64 * KIB + 1, 300 * KIB])
def test_signed_payload_reads_back(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    wire = sdk_put(data)
    assert authenticated(wire).payload == hashlib.sha256(data).hexdigest()
    body = opened(wire)
    assert body.length == size
    assert read_all(body) == data


def test_a_wrong_body_fails_in_the_read_that_reaches_the_end() -> None:
    data = b"x" * MIB
    wire = sdk_put(data)
    for index in (0, MIB // 2, MIB - 1):
        body = opened(wire, flip(data, index))
        handed_out = 0
        with pytest.raises(S3Error) as caught:
            while chunk := body.read(64 * KIB):
                handed_out += len(chunk)
        assert (caught.value.code, caught.value.status) == ("XAmzContentSHA256Mismatch", 400)
        # the bytes before the end went out; the last ones never did
        assert MIB - READ_BUFFER <= handed_out < MIB


def test_a_wrong_small_or_empty_body_is_a_sha256_mismatch() -> None:
    wire = sdk_put(b"hello")
    refused(opened(wire, b"hellO").read, "XAmzContentSHA256Mismatch", 400)
    empty = sdk_put(b"")
    refused(opened(empty, b"!", content_length=1).read, "XAmzContentSHA256Mismatch", 400)


@pytest.mark.parametrize("received", [0, 1, 99, 64 * KIB])
def test_a_short_body_is_incomplete(received: int) -> None:
    data = b"q" * (64 * KIB + 1)
    wire = sdk_put(data)
    error = refused(opened(wire, data[:received]).read, "IncompleteBody", 400)
    assert error.resource == "/b/k"


def test_bytes_past_content_length_are_left_on_the_stream() -> None:
    """The next request on a kept-alive connection must not be eaten."""
    wire = sdk_put(b"payload")
    stream = io.BytesIO(b"payload" + b"GET /next HTTP/1.1\r\n")
    body = open_body(authenticated(wire), wire.headers, stream, 7)
    assert body.read() == b"payload"
    assert stream.read() == b"GET /next HTTP/1.1\r\n"


def test_a_plain_body_needs_content_length() -> None:
    wire = sdk_put(b"abc")
    refused(lambda: opened(wire, content_length=None), "MissingContentLength", 411)


# -- UNSIGNED-PAYLOAD ---------------------------------------------------------------


def test_presigned_put_body_is_taken_as_is() -> None:
    data = b"\x00\xff anything at all \r\n0\r\n\r\n"
    wire = botocore_signed("PUT", f"{ENDPOINT}/b/k", presign=60)
    assert authenticated(wire).payload == UNSIGNED_PAYLOAD
    body = opened(wire, data, content_length=len(data))
    assert body.length == len(data)
    assert read_all(body) == data


def test_unsigned_payload_from_boto3_is_checked_by_its_checksum() -> None:
    data = b"unsigned but checksummed" * 1000
    wire = sdk_put_unsigned_payload(data)
    assert authenticated(wire).payload == UNSIGNED_PAYLOAD
    assert "x-amz-checksum-crc32" in {k.lower() for k in wire.headers}
    assert read_all(opened(wire)) == data
    error = refused(opened(wire, flip(data, 5)).read, "BadDigest", 400)
    assert error.message == "The CRC32 you specified did not match the calculated checksum."


# -- Content-MD5 ----------------------------------------------------------------------


def test_content_md5_right_and_wrong() -> None:
    data = b"md5 me" * 100
    right = b64(hashlib.md5(data).digest())
    assert read_all(opened(sdk_put(data, ContentMD5=right))) == data
    wrong = b64(hashlib.md5(b"other").digest())
    error = refused(opened(sdk_put(data, ContentMD5=wrong)).read, "BadDigest", 400)
    assert error.message == "The Content-MD5 you specified did not match what we received."


@pytest.mark.parametrize("value", ["not base64!", b64(b"\x01" * 15), b64(b"\x01" * 17), "===="])
def test_malformed_content_md5_is_invalid_digest(value: str) -> None:
    wire = sdk_put(b"data", ContentMD5=value)
    refused(lambda: opened(wire), "InvalidDigest", 400)


# -- x-amz-checksum-* headers ---------------------------------------------------------

DIGESTS: dict[str, Callable[[bytes], bytes]] = {
    "crc32": lambda data: zlib.crc32(data).to_bytes(4, "big"),
    "sha1": lambda data: hashlib.sha1(data).digest(),
    "sha256": lambda data: hashlib.sha256(data).digest(),
}
SDK_NAMES = {"crc32": "CRC32", "sha1": "SHA1", "sha256": "SHA256"}


@pytest.mark.parametrize("algorithm", sorted(DIGESTS))
def test_checksum_header_right(algorithm: str) -> None:
    data = b"checksummed" * 500
    wire = sdk_put(data, ChecksumAlgorithm=SDK_NAMES[algorithm])
    assert wire.get(f"x-amz-checksum-{algorithm}") == b64(DIGESTS[algorithm](data))
    assert read_all(opened(wire)) == data


@pytest.mark.parametrize("algorithm", sorted(DIGESTS))
def test_checksum_header_wrong_is_bad_digest(algorithm: str) -> None:
    data = b"checksummed" * 500
    claimed = b64(DIGESTS[algorithm](b"something else"))
    wire = sdk_put(data, **{f"Checksum{SDK_NAMES[algorithm]}": claimed})
    assert wire.get(f"x-amz-checksum-{algorithm}") == claimed
    error = refused(opened(wire).read, "BadDigest", 400)
    name = SDK_NAMES[algorithm]
    assert error.message == f"The {name} you specified did not match the calculated checksum."


@pytest.mark.parametrize("algorithm", sorted(DIGESTS))
def test_malformed_checksum_header_is_invalid_request(algorithm: str) -> None:
    wire = sdk_put(b"data", **{f"Checksum{SDK_NAMES[algorithm]}": "AAAA"})  # 3 bytes
    error = refused(lambda: opened(wire), "InvalidRequest", 400)
    assert error.message == f"Value for x-amz-checksum-{algorithm} header is invalid."


def test_two_checksum_headers_are_refused() -> None:
    data = b"data"
    wire = botocore_signed(
        "PUT",
        f"{ENDPOINT}/b/k",
        body=data,
        headers={
            "x-amz-checksum-crc32": crc32_b64(data),
            "x-amz-checksum-sha1": b64(DIGESTS["sha1"](data)),
        },
    )
    refused(lambda: opened(wire), "InvalidRequest", 400)


@pytest.mark.parametrize(("algorithm", "size"), [("crc32c", 4), ("crc64nvme", 8)])
def test_checksums_this_gateway_cannot_compute_are_checked_for_shape_only(
    algorithm: str, size: int
) -> None:
    """No CRC32C/CRC64NVME implementation is available here (see checksums.py): a
    well-formed value is trusted, a malformed one still refused."""
    data = b"data"
    trusted = botocore_signed(
        "PUT",
        f"{ENDPOINT}/b/k",
        body=data,
        headers={f"x-amz-checksum-{algorithm}": b64(b"\x07" * size)},
    )
    assert read_all(opened(trusted)) == data
    malformed = botocore_signed(
        "PUT",
        f"{ENDPOINT}/b/k",
        body=data,
        headers={f"x-amz-checksum-{algorithm}": b64(b"\x07" * (size + 1))},
    )
    refused(lambda: opened(malformed), "InvalidRequest", 400)


# -- STREAMING-AWS4-HMAC-SHA256-PAYLOAD: the AWS documentation's example ---------------


def open_aws(
    body: bytes = AWS_BODY,
    *,
    headers: dict[str, str] = AWS_SIGNED,
    content_length: int | None = None,
    step: int | None = None,
) -> Body:
    stream: BinaryIO = io.BytesIO(body) if step is None else cast(BinaryIO, Trickle(body, step))
    length = int(headers["Content-Length"]) if content_length is None else content_length
    return open_body(aws_signed(headers), headers, stream, length)


def test_aws_example_verifies_and_decodes() -> None:
    assert len(AWS_BODY) == 66824  # the documented Content-Length
    body = open_aws()
    assert body.length == 66560
    assert read_all(body) == AWS_DATA


def test_aws_example_without_content_length() -> None:
    body = open_body(aws_signed(AWS_SIGNED), AWS_SIGNED, io.BytesIO(AWS_BODY + b"NEXT"), None)
    assert read_all(body) == AWS_DATA


def test_aws_chunked_helper_frames_the_aws_example_byte_for_byte() -> None:
    """The framing the property tests below rely on is the documented one."""
    assert aws_chunked(AWS_DATA, 64 * KIB, signed=aws_signed(AWS_SIGNED)) == AWS_BODY


@pytest.mark.parametrize(
    "index",
    [
        AWS_BODY.index(b"\r\n") + 2,  # first data byte of chunk 1
        AWS_BODY.index(b"\r\n") + 2 + 64 * KIB - 1,  # its last
        AWS_BODY.index(b"400;") + 100,  # inside chunk 2
        AWS_BODY.index(AWS_CHUNK_SIGNATURES[1].encode()) + 10,  # a chunk signature
        AWS_BODY.index(AWS_CHUNK_SIGNATURES[2].encode()) + 63,  # the final chunk's
    ],
)
def test_aws_example_with_a_tampered_byte_is_signature_does_not_match(index: int) -> None:
    error = refused(lambda: read_all(open_aws(flip(AWS_BODY, index))), "SignatureDoesNotMatch", 403)
    assert "chunk signature" in error.message


def test_aws_example_with_chunks_reordered_is_refused() -> None:
    first = AWS_BODY.index(b"400;")
    final = AWS_BODY.index(b"0;chunk")
    swapped = AWS_BODY[first:final] + AWS_BODY[:first] + AWS_BODY[final:]
    refused(lambda: read_all(open_aws(swapped)), "SignatureDoesNotMatch", 403)


@pytest.mark.parametrize(
    "cut",
    [
        10,  # inside the first chunk header
        AWS_BODY.index(b"\r\n") + 2 + 1000,  # inside chunk 1's data
        AWS_BODY.index(b"400;") - 1,  # between data and its CRLF
        AWS_BODY.index(b"0;chunk"),  # the final chunk missing
        len(AWS_BODY) - 40,  # inside the final chunk header
        len(AWS_BODY) - 2,  # the closing CRLF missing
    ],
)
@pytest.mark.parametrize("declared", [True, False])
def test_aws_example_truncated_is_incomplete(cut: int, declared: bool) -> None:
    """Cut short with Content-Length declared, or (length unknown) where the stream
    ends; an end right after the final chunk, with no length to contradict it, is
    the form some SDKs send and is accepted."""
    body = AWS_BODY[:cut]
    if declared:
        refused(lambda: read_all(open_aws(body)), "IncompleteBody", 400)
    elif cut == len(AWS_BODY) - 2:
        stream = io.BytesIO(body)
        assert read_all(open_body(aws_signed(AWS_SIGNED), AWS_SIGNED, stream, None)) == AWS_DATA
    else:
        stream = io.BytesIO(body)
        opened_body = open_body(aws_signed(AWS_SIGNED), AWS_SIGNED, stream, None)
        refused(lambda: read_all(opened_body), "IncompleteBody", 400)


def test_aws_example_with_bytes_after_its_end_is_refused() -> None:
    body = AWS_BODY + b"junk"
    error = refused(
        lambda: read_all(open_aws(body, content_length=len(body))), "InvalidRequest", 400
    )
    assert "follow the end" in error.message


@pytest.mark.parametrize(("declared", "code"), [(9, "InvalidRequest"), (11, "IncompleteBody")])
def test_decoded_content_length_mismatch(declared: int, code: str) -> None:
    """A client that signed x-amz-decoded-content-length: 9 (or 11) and sent 10 bytes."""
    wire = framed(streaming_wire(STREAMING_SIGNED, declared), b"0123456789", 4)
    body = opened(wire)
    assert body.length == declared
    refused(lambda: read_all(body), code, 400)
    assert read_all(opened(framed(streaming_wire(STREAMING_SIGNED, 10), b"0123456789", 4))) == (
        b"0123456789"
    )


def test_decoded_content_length_that_is_no_number() -> None:
    wire = streaming_wire(STREAMING_SIGNED, 10)
    headers = {**wire.headers, "X-Amz-Decoded-Content-Length": "ten"}
    refused(
        lambda: open_body(authenticated(wire), headers, io.BytesIO(b""), 0),
        "InvalidArgument",
        400,
    )


def test_signed_chunks_chained_from_another_request_are_refused() -> None:
    """Chunks chained from a different seed (another request's) do not verify."""
    data = b"x" * 1000
    ours = streaming_wire(STREAMING_SIGNED, len(data))
    other = authenticated(botocore_signed("GET", f"{ENDPOINT}/b/other"))
    forged = aws_chunked(data, 300, signed=other)
    assert read_all(opened(framed(ours, data, 300))) == data
    refused(
        lambda: read_all(opened(ours, forged, content_length=len(forged))),
        "SignatureDoesNotMatch",
        403,
    )


# -- STREAMING-UNSIGNED-PAYLOAD-TRAILER: what boto3 sends over TLS ----------------------


def test_boto3_tls_put_verifies_its_trailer() -> None:
    data = b"streamed by boto3 " * 1000
    wire = sdk_put(data, endpoint=TLS_ENDPOINT)
    assert authenticated(wire).payload == STREAMING_UNSIGNED_TRAILER
    assert wire.get("X-Amz-Trailer") == "x-amz-checksum-crc32"
    assert wire_length(wire) is None
    assert f"x-amz-checksum-crc32:{crc32_b64(data)}\r\n".encode() in wire.body
    body = opened(wire)
    assert body.length == len(data)
    assert read_all(body) == data


@pytest.mark.parametrize("algorithm", ["SHA1", "SHA256", "CRC32"])
def test_boto3_tls_upload_part_with_each_trailer(algorithm: str) -> None:
    data = b"part" * 3000
    (wire,) = sdk_requests(
        TLS_ENDPOINT,
        "upload_part",
        Bucket="b",
        Key="k",
        UploadId="u",
        PartNumber=1,
        Body=data,
        ChecksumAlgorithm=algorithm,
    )
    assert wire.get("X-Amz-Trailer") == f"x-amz-checksum-{algorithm.lower()}"
    assert read_all(opened(wire)) == data


def test_boto3_tls_put_with_a_wrong_trailer_checksum_is_bad_digest() -> None:
    data = b"streamed by boto3 " * 1000
    wire = sdk_put(data, endpoint=TLS_ENDPOINT)
    body = wire.body.replace(crc32_b64(data).encode(), crc32_b64(b"other").encode())
    assert body != wire.body
    error = refused(lambda: read_all(opened(wire, body)), "BadDigest", 400)
    assert error.message == "The CRC32 you specified did not match the calculated checksum."


def test_boto3_tls_put_corrupted_in_flight_is_bad_digest() -> None:
    """Unsigned chunks: only the trailer checksum stands between a flipped bit and disk."""
    data = b"streamed by boto3 " * 1000
    wire = sdk_put(data, endpoint=TLS_ENDPOINT)
    index = wire.body.index(b"\r\n") + 2 + 500
    refused(lambda: read_all(opened(wire, flip(wire.body, index))), "BadDigest", 400)


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        (b"x-amz-checksum-crc32:", b"x-amz-checksum-sha1:", "MalformedTrailerError"),
        (b"x-amz-checksum-crc32:", b"x-amz-checksum-crc32 ", "MalformedTrailerError"),
        (b"==\r\n\r\n", b"=\r\n\r\n", "InvalidRequest"),
    ],
)
def test_boto3_tls_put_with_a_mangled_trailer(old: bytes, new: bytes, code: str) -> None:
    data = b"trailer"
    wire = sdk_put(data, endpoint=TLS_ENDPOINT)
    assert old in wire.body
    refused(lambda: read_all(opened(wire, wire.body.replace(old, new))), code, 400)


def test_boto3_tls_put_without_its_declared_trailer_is_malformed() -> None:
    data = b"trailer"
    wire = sdk_put(data, endpoint=TLS_ENDPOINT)
    body = wire.body[: wire.body.index(b"x-amz-checksum")] + b"\r\n"
    refused(lambda: read_all(opened(wire, body)), "MalformedTrailerError", 400)


# -- STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER --------------------------------------


def test_aws_trailer_example_verifies_and_decodes() -> None:
    assert len(AWS_TRAILER_BODY) == 66946
    body = open_aws(AWS_TRAILER_BODY, headers=AWS_SIGNED_TRAILER)
    assert body.length == 66560
    assert read_all(body) == AWS_DATA


def test_aws_chunked_helper_frames_the_aws_trailer_example_byte_for_byte() -> None:
    framed_body = aws_chunked(
        AWS_DATA,
        64 * KIB,
        signed=aws_signed(AWS_SIGNED_TRAILER),
        trailers=[("x-amz-checksum-crc32c", "sOO8/Q==")],
        sign_trailer=True,
    )
    assert framed_body == AWS_TRAILER_BODY


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"sOO8/Q==", b"sOO8/R=="),  # the checksum, still well formed
        (AWS_TRAILER_SIGNATURE[:8].encode(), b"00000000"),  # the trailer signature
        (b"x-amz-trailer-signature:" + AWS_TRAILER_SIGNATURE.encode() + b"\r\n", b""),  # gone
    ],
)
def test_aws_trailer_example_with_its_trailer_altered(old: bytes, new: bytes) -> None:
    body = AWS_TRAILER_BODY.replace(old, new)
    assert body != AWS_TRAILER_BODY
    error = refused(
        lambda: read_all(open_aws(body, headers=AWS_SIGNED_TRAILER, content_length=len(body))),
        "SignatureDoesNotMatch",
        403,
    )
    assert "trailer signature" in error.message


def test_signed_trailer_with_a_wrong_crc32_is_bad_digest() -> None:
    """The trailer signature holds (the client signed what it computed) but the CRC32
    it computed is not the data's."""
    data = b"signed trailer " * 700
    wire = streaming_wire(STREAMING_SIGNED_TRAILER, len(data), trailer="x-amz-checksum-crc32")
    right = framed(wire, data, 4000, [("x-amz-checksum-crc32", crc32_b64(data))])
    assert read_all(opened(right)) == data
    wrong = framed(wire, data, 4000, [("x-amz-checksum-crc32", crc32_b64(data + b"!"))])
    refused(lambda: read_all(opened(wrong)), "BadDigest", 400)


# -- every mode, a few bytes at a time ------------------------------------------------

MODES = ["sha256", "unsigned", "md5+sha1", "signed", "unsigned-trailer", "signed-trailer"]


def mode_wire(mode: str, data: bytes) -> Wire:
    if mode == "sha256":
        return sdk_put(data)
    if mode == "unsigned":
        return sdk_put_unsigned_payload(data)
    if mode == "md5+sha1":
        return sdk_put(data, ContentMD5=b64(hashlib.md5(data).digest()), ChecksumAlgorithm="SHA1")
    if mode == "unsigned-trailer":
        return sdk_put(data, endpoint=TLS_ENDPOINT)
    if mode == "signed":
        return framed(streaming_wire(STREAMING_SIGNED, len(data)), data, 1000)
    wire = streaming_wire(STREAMING_SIGNED_TRAILER, len(data), trailer="x-amz-checksum-sha256")
    return framed(wire, data, 1000, [("x-amz-checksum-sha256", b64(hashlib.sha256(data).digest()))])


@pytest.mark.parametrize("step", [1, 2, 3, 7, 100])
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_decodes_the_same_a_few_bytes_at_a_time(mode: str, step: int) -> None:
    data = bytes(range(256)) * 12 + b"tail\r\n0\r\n"
    wire = mode_wire(mode, data)
    assert read_all(opened(wire)) == data
    assert read_all(opened(wire, step=step), size=977) == data
    assert read_all(opened(wire, step=step), size=1) == data


@pytest.mark.parametrize("step", [1, 5])
def test_aws_examples_a_few_bytes_at_a_time(step: int) -> None:
    assert read_all(open_aws(step=step)) == AWS_DATA
    trailer = open_aws(AWS_TRAILER_BODY, headers=AWS_SIGNED_TRAILER, step=step)
    assert read_all(trailer) == AWS_DATA


@pytest.mark.parametrize("step", [1, 3])
def test_corruption_is_caught_a_few_bytes_at_a_time(step: int) -> None:
    data = b"0123456789" * 50
    signed = mode_wire("signed", data)
    index = signed.body.index(b"\r\n") + 5
    refused(
        lambda: read_all(opened(signed, flip(signed.body, index), step=step)),
        "SignatureDoesNotMatch",
        403,
    )
    tls = mode_wire("unsigned-trailer", data)
    refused(
        lambda: read_all(opened(tls, flip(tls.body, tls.body.index(b"\r\n") + 5), step=step)),
        "BadDigest",
        400,
    )


# -- large bodies stream through in bounded reads --------------------------------------


@pytest.mark.parametrize("mode", ["sha256", "unsigned-trailer", "signed"])
def test_five_mib_streams_through_bounded_reads(mode: str) -> None:
    data = hashlib.sha256(b"seed").digest() * (5 * MIB // 32)
    wire = (
        mode_wire(mode, data)
        if mode != "signed"
        else framed(streaming_wire(STREAMING_SIGNED, len(data)), data, 64 * KIB)
    )
    stream = Trickle(wire.body, 1 * MIB)
    body = open_body(authenticated(wire), wire.headers, cast(BinaryIO, stream), wire_length(wire))
    digest = hashlib.sha256()
    handed_out = 0
    while chunk := body.read(64 * KIB):
        assert len(chunk) <= 64 * KIB
        handed_out += len(chunk)
        digest.update(chunk)
        # never more than one read buffer (and some framing) ahead of the reader
        assert stream.consumed - handed_out <= READ_BUFFER + 64 * MAX_LINE
    assert handed_out == len(data)
    assert digest.digest() == hashlib.sha256(data).digest()
    assert stream.consumed == len(wire.body)


def test_five_mib_corrupted_at_the_end_fails_only_at_the_end() -> None:
    data = b"\x5a" * (5 * MIB)
    wire = sdk_put(data, endpoint=TLS_ENDPOINT)
    end = wire.body.rindex(b"\r\n0\r\n") - 1  # the last data byte
    body = opened(wire, flip(wire.body, end))
    handed_out = 0
    with pytest.raises(S3Error) as caught:
        while chunk := body.read(64 * KIB):
            handed_out += len(chunk)
    assert caught.value.code == "BadDigest"
    assert len(data) - READ_BUFFER <= handed_out < len(data)


# -- property: whatever is framed decodes back ------------------------------------------


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.binary(max_size=5000),
    chunk_size=st.integers(min_value=1, max_value=2000),
    mode=st.sampled_from([STREAMING_SIGNED, STREAMING_SIGNED_TRAILER, STREAMING_UNSIGNED_TRAILER]),
    step=st.one_of(st.none(), st.integers(min_value=1, max_value=64)),
    algorithm=st.sampled_from(sorted(DIGESTS)),
)
def test_property_aws_chunked_round_trips(
    data: bytes, chunk_size: int, mode: str, step: int | None, algorithm: str
) -> None:
    name = f"x-amz-checksum-{algorithm}"
    trailer = None if mode == STREAMING_SIGNED else name
    wire = streaming_wire(mode, len(data), trailer=trailer)
    trailers = [(name, b64(DIGESTS[algorithm](data)))] if trailer else None
    wire = framed(wire, data, chunk_size, trailers)
    assert read_all(opened(wire, step=step), size=chunk_size + 7) == data
    if data:  # and any flipped data bit is caught (by a chunk signature or the trailer)
        header_end = wire.body.index(b"\r\n") + 2
        corrupted = flip(wire.body, header_end)
        with pytest.raises(S3Error) as caught:
            read_all(opened(wire, corrupted, step=step))
        assert caught.value.code in {"SignatureDoesNotMatch", "BadDigest"}
